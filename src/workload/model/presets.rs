//! The presets: the exact tensor shapes of open models, from each model's
//! published Hugging Face `config.json` (cited per preset), in the module
//! order of the Transformers implementation.

use super::{Model, Moe, Preset, Tensor};

/// The presets, smallest first.
pub const PRESETS: &[Preset] = &[
    // https://huggingface.co/openai-community/gpt2/blob/main/config.json:
    // n_embd 768, n_layer 12, n_head 12, n_positions 1024, vocab_size 50257,
    // tied embeddings; 124,439,808 parameters.
    Preset {
        name: "gpt2",
        aliases: &["gpt2-124m", "gpt-2"],
        source: "openai-community/gpt2 config.json",
        build: || gpt2("gpt2", 768, 12, 1024, 50257),
    },
    // https://huggingface.co/TinyLlama/TinyLlama-1.1B-Chat-v1.0/blob/main/config.json:
    // hidden_size 2048, intermediate_size 5632, num_hidden_layers 22,
    // num_attention_heads 32, num_key_value_heads 4, vocab_size 32000,
    // tie_word_embeddings false; 1,100,048,384 parameters.
    Preset {
        name: "tinyllama-1.1b",
        aliases: &["tinyllama"],
        source: "TinyLlama/TinyLlama-1.1B-Chat-v1.0 config.json",
        build: || llama("tinyllama-1.1b", Llama::new(2048, 5632, 22, 32, 4, 32000, false)),
    },
    // https://huggingface.co/meta-llama/Llama-3.2-1B/blob/main/config.json:
    // hidden_size 2048, intermediate_size 8192, num_hidden_layers 16,
    // num_attention_heads 32, num_key_value_heads 8, head_dim 64,
    // vocab_size 128256, tie_word_embeddings true; 1,235,814,400 parameters.
    Preset {
        name: "llama-3.2-1b",
        aliases: &["llama3.2-1b"],
        source: "meta-llama/Llama-3.2-1B config.json",
        build: || llama("llama-3.2-1b", Llama::new(2048, 8192, 16, 32, 8, 128256, true)),
    },
    // https://huggingface.co/meta-llama/Llama-2-7b-hf/blob/main/config.json:
    // hidden_size 4096, intermediate_size 11008, num_hidden_layers 32,
    // num_attention_heads 32, num_key_value_heads 32, vocab_size 32000,
    // untied; 6,738,415,616 parameters.
    Preset {
        name: "llama-2-7b",
        aliases: &["llama2-7b"],
        source: "meta-llama/Llama-2-7b-hf config.json",
        build: || llama("llama-2-7b", Llama::new(4096, 11008, 32, 32, 32, 32000, false)),
    },
    // https://huggingface.co/mistralai/Mistral-7B-v0.1/blob/main/config.json:
    // hidden_size 4096, intermediate_size 14336, num_hidden_layers 32,
    // num_attention_heads 32, num_key_value_heads 8, vocab_size 32000,
    // untied; 7,241,732,096 parameters.
    Preset {
        name: "mistral-7b",
        aliases: &["mistral-7b-v0.1"],
        source: "mistralai/Mistral-7B-v0.1 config.json",
        build: || llama("mistral-7b", Llama::new(4096, 14336, 32, 32, 8, 32000, false)),
    },
    // https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json:
    // hidden_size 4096, intermediate_size 14336, num_hidden_layers 32,
    // num_attention_heads 32, num_key_value_heads 8, vocab_size 128256,
    // untied; 8,030,261,248 parameters.
    Preset {
        name: "llama-3-8b",
        aliases: &["llama3-8b", "llama-3.1-8b"],
        source: "meta-llama/Meta-Llama-3-8B config.json",
        build: || llama("llama-3-8b", Llama::new(4096, 14336, 32, 32, 8, 128256, false)),
    },
    // https://huggingface.co/meta-llama/Llama-2-70b-hf/blob/main/config.json:
    // hidden_size 8192, intermediate_size 28672, num_hidden_layers 80,
    // num_attention_heads 64, num_key_value_heads 8, vocab_size 32000,
    // untied; 68,976,648,192 parameters.
    Preset {
        name: "llama-2-70b",
        aliases: &["llama2-70b"],
        source: "meta-llama/Llama-2-70b-hf config.json",
        build: || llama("llama-2-70b", Llama::new(8192, 28672, 80, 64, 8, 32000, false)),
    },
    // https://huggingface.co/meta-llama/Meta-Llama-3-70B/blob/main/config.json:
    // hidden_size 8192, intermediate_size 28672, num_hidden_layers 80,
    // num_attention_heads 64, num_key_value_heads 8, vocab_size 128256,
    // untied; 70,553,706,496 parameters.
    Preset {
        name: "llama-3-70b",
        aliases: &["llama3-70b", "llama-3.1-70b"],
        source: "meta-llama/Meta-Llama-3-70B config.json",
        build: || llama("llama-3-70b", Llama::new(8192, 28672, 80, 64, 8, 128256, false)),
    },
    // https://huggingface.co/deepseek-ai/deepseek-moe-16b-base/blob/main/config.json:
    // hidden_size 2048, intermediate_size 10944 (the dense first layer),
    // moe_intermediate_size 1408, num_hidden_layers 28, num_attention_heads
    // 16, num_key_value_heads 16, n_routed_experts 64, n_shared_experts 2,
    // num_experts_per_tok 6, first_k_dense_replace 1, moe_layer_freq 1,
    // vocab_size 102400, untied; 16,375,728,128 parameters (published:
    // 16.4B). DeepSeek's fine-grained experts with shared experts.
    Preset {
        name: "deepseek-moe-16b",
        aliases: &["deepseek-moe", "deepseekmoe-16b"],
        source: "deepseek-ai/deepseek-moe-16b-base config.json",
        build: deepseek_moe_16b,
    },
    // https://huggingface.co/mistralai/Mixtral-8x7B-v0.1/blob/main/config.json:
    // hidden_size 4096, intermediate_size 14336, num_hidden_layers 32,
    // num_attention_heads 32, num_key_value_heads 8, num_local_experts 8,
    // num_experts_per_tok 2, vocab_size 32000, untied; 46,702,792,704
    // parameters.
    Preset {
        name: "mixtral-8x7b",
        aliases: &["mixtral", "mixtral-8x7b-v0.1"],
        source: "mistralai/Mixtral-8x7B-v0.1 config.json",
        build: mixtral_8x7b,
    },
];

/// Attention of a Llama-family layer: q, k, v, o.
fn attention(h: u64, heads: u64, kv_heads: u64) -> Vec<Tensor> {
    let kv = kv_heads * (h / heads);
    vec![
        Tensor::new("self_attn.q_proj", h * h, true),
        Tensor::new("self_attn.k_proj", h * kv, true),
        Tensor::new("self_attn.v_proj", h * kv, true),
        Tensor::new("self_attn.o_proj", h * h, true),
    ]
}

/// The two norms that end a Llama-family layer.
fn norms(h: u64) -> [Tensor; 2] {
    [
        Tensor::new("input_layernorm", h, false),
        Tensor::new("post_attention_layernorm", h, false),
    ]
}

/// A Llama-family decoder of `layers` copies of `layer`: the token
/// embedding before them, the final norm and the output head (none when
/// tied to the embedding) after them.
fn decoder(name: &str, layers: usize, h: u64, vocab: u64, layer: Vec<Tensor>, tied: bool) -> Model {
    let mut post = vec![Tensor::new("norm", h, false)];
    if !tied {
        post.push(Tensor::new("lm_head", vocab * h, true));
    }
    let pre = vec![Tensor::new("embed_tokens", vocab * h, true)];
    Model::uniform(name, layers, h, vocab, pre, layer, post)
}

/// Mixtral (transformers' MixtralDecoderLayer: self_attn, block_sparse_moe
/// with its router `gate` and experts w1, w2, w3, then the two norms).
fn mixtral_8x7b() -> Model {
    let (h, i, experts) = (4096u64, 14336u64, 8usize);
    let mut layer = attention(h, 32, 8);
    layer.push(Tensor::new("block_sparse_moe.gate", experts as u64 * h, false));
    for e in 0..experts {
        for w in ["w1", "w2", "w3"] {
            layer.push(Tensor::expert(&format!("block_sparse_moe.experts.{e}.{w}"), h * i));
        }
    }
    layer.extend(norms(h));
    Model {
        moe: Some(Moe { experts, top_k: 2 }),
        ..decoder("mixtral-8x7b", 32, h, 32000, layer, false)
    }
}

/// DeepSeekMoE 16B (DeepseekDecoderLayer: self_attn, then `mlp`: a dense
/// DeepseekMLP in the first layer, else DeepseekMoE's experts, router
/// `gate` and shared experts, then the two norms).
fn deepseek_moe_16b() -> Model {
    let (h, dense, ffn, experts) = (2048u64, 10944u64, 1408u64, 64usize);
    let mlp = |prefix: &str, inner: u64, expert: bool| -> Vec<Tensor> {
        ["gate_proj", "up_proj", "down_proj"]
            .iter()
            .map(|w| {
                let name = format!("{prefix}.{w}");
                if expert {
                    Tensor::expert(&name, h * inner)
                } else {
                    Tensor::new(&name, h * inner, true)
                }
            })
            .collect()
    };
    let mut first_layer = attention(h, 16, 16);
    first_layer.extend(mlp("mlp", dense, false));
    first_layer.extend(norms(h));
    let mut layer = attention(h, 16, 16);
    for e in 0..experts {
        layer.extend(mlp(&format!("mlp.experts.{e}"), ffn, true));
    }
    layer.push(Tensor::new("mlp.gate", experts as u64 * h, false));
    layer.extend(mlp("mlp.shared_experts", 2 * ffn, false));
    layer.extend(norms(h));
    Model {
        first_layers: 1,
        first_layer,
        moe: Some(Moe { experts, top_k: 6 }),
        ..decoder("deepseek-moe-16b", 28, h, 102400, layer, false)
    }
}

/// A Llama-family decoder (Llama, Mistral, TinyLlama share the layout of
/// transformers' LlamaDecoderLayer: self_attn q/k/v/o, mlp gate/up/down,
/// input_layernorm, post_attention_layernorm).
struct Llama {
    hidden: u64,
    intermediate: u64,
    layers: usize,
    heads: u64,
    kv_heads: u64,
    vocab: u64,
    tied: bool,
}

impl Llama {
    fn new(hidden: u64, intermediate: u64, layers: usize, heads: u64, kv_heads: u64, vocab: u64, tied: bool) -> Llama {
        Llama {
            hidden,
            intermediate,
            layers,
            heads,
            kv_heads,
            vocab,
            tied,
        }
    }
}

fn llama(name: &str, c: Llama) -> Model {
    let (h, i) = (c.hidden, c.intermediate);
    let mut layer = attention(h, c.heads, c.kv_heads);
    layer.extend([
        Tensor::new("mlp.gate_proj", h * i, true),
        Tensor::new("mlp.up_proj", h * i, true),
        Tensor::new("mlp.down_proj", i * h, true),
    ]);
    layer.extend(norms(h));
    decoder(name, c.layers, h, c.vocab, layer, c.tied)
}

/// GPT-2 (transformers' GPT2Block: ln_1, attn.c_attn, attn.c_proj, ln_2,
/// mlp.c_fc, mlp.c_proj, each with a bias; output head tied to wte).
fn gpt2(name: &str, h: u64, layers: usize, positions: u64, vocab: u64) -> Model {
    let layer = vec![
        Tensor::new("ln_1.weight", h, false),
        Tensor::new("ln_1.bias", h, false),
        Tensor::new("attn.c_attn.weight", h * 3 * h, true),
        Tensor::new("attn.c_attn.bias", 3 * h, true),
        Tensor::new("attn.c_proj.weight", h * h, true),
        Tensor::new("attn.c_proj.bias", h, false),
        Tensor::new("ln_2.weight", h, false),
        Tensor::new("ln_2.bias", h, false),
        Tensor::new("mlp.c_fc.weight", h * 4 * h, true),
        Tensor::new("mlp.c_fc.bias", 4 * h, true),
        Tensor::new("mlp.c_proj.weight", 4 * h * h, true),
        Tensor::new("mlp.c_proj.bias", h, false),
    ];
    let pre = vec![
        Tensor::new("wte", vocab * h, true),
        Tensor::new("wpe", positions * h, false),
    ];
    let post = vec![Tensor::new("ln_f.weight", h, false), Tensor::new("ln_f.bias", h, false)];
    Model::uniform(name, layers, h, vocab, pre, layer, post)
}
