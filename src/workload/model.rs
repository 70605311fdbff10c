//! A model as its communication sees it: parameter tensors in the order the
//! framework lists them (`model.parameters()`), grouped into what comes
//! before the transformer layers (embeddings), one layer (the same for every
//! layer), and what comes after (final norm, an untied output head); with
//! the parameter and gradient element types.
//!
//! Presets carry the exact tensor shapes of open models, from each model's
//! published Hugging Face `config.json` (cited per preset), in the module
//! order of the Transformers implementation. The plain form
//! (`--params 7e9 --layers 32`) derives tensors as `Model::plain` documents.
//! Nothing here knows about strategies; they read `tensors()` and the unit
//! structure.

use crate::error::Error;
use crate::types::DType;

/// One parameter tensor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tensor {
    pub name: String,
    pub elements: u64,
    /// Megatron tensor parallelism splits it over the TP group (weight
    /// matrices, column-parallel biases, the vocabulary-parallel embedding);
    /// norms, row-parallel biases and position embeddings are replicated.
    pub tp_split: bool,
    /// One expert's weight in a mixture-of-experts layer: expert
    /// parallelism places it on one rank of the expert-parallel group.
    pub expert: bool,
}

impl Tensor {
    pub fn new(name: &str, elements: u64, tp_split: bool) -> Tensor {
        Tensor {
            name: name.into(),
            elements,
            tp_split,
            expert: false,
        }
    }

    fn expert(name: &str, elements: u64) -> Tensor {
        Tensor {
            expert: true,
            ..Tensor::new(name, elements, true)
        }
    }

    /// Elements one tensor-parallel rank holds: `ceil(elements / tp)` for a
    /// split tensor (Megatron pads the vocabulary to a multiple of the
    /// degree; the presets' matrices divide exactly), all of them otherwise.
    pub fn shard_elements(&self, tp: usize) -> u64 {
        if self.tp_split {
            self.elements.div_ceil(tp.max(1) as u64)
        } else {
            self.elements
        }
    }
}

/// Where a tensor sits: before the layers, in layer `i`, or after them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Place {
    Pre,
    Layer(usize),
    Post,
}

/// A model description.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Model {
    pub name: String,
    pub layers: usize,
    pub hidden: u64,
    pub vocab: u64,
    pub param_dtype: DType,
    pub grad_dtype: DType,
    /// Tensors before the layers, in `parameters()` order.
    pub pre: Vec<Tensor>,
    /// One layer's tensors, in `parameters()` order.
    pub layer: Vec<Tensor>,
    /// Tensors after the layers, in `parameters()` order.
    pub post: Vec<Tensor>,
    /// The first `first_layers` layers are `first_layer`, not `layer`
    /// (DeepSeek's dense layers before its mixture-of-experts ones).
    pub first_layers: usize,
    pub first_layer: Vec<Tensor>,
    /// Mixture of experts: the routed experts per layer and the experts
    /// each token goes to.
    pub moe: Option<Moe>,
}

/// A mixture-of-experts layer's routing: `experts` routed experts (their
/// tensors are `Tensor::expert`), each token sent to `top_k` of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Moe {
    pub experts: usize,
    pub top_k: usize,
}

/// A preset's name, other spellings, and where its figures come from.
#[derive(Debug)]
pub struct Preset {
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    pub source: &'static str,
    build: fn() -> Model,
}

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
    layer.push(Tensor::new("input_layernorm", h, false));
    layer.push(Tensor::new("post_attention_layernorm", h, false));
    Model {
        name: "mixtral-8x7b".into(),
        layers: 32,
        hidden: h,
        vocab: 32000,
        param_dtype: DType::Bfloat16,
        grad_dtype: DType::Bfloat16,
        pre: vec![Tensor::new("embed_tokens", 32000 * h, true)],
        layer,
        post: vec![Tensor::new("norm", h, false), Tensor::new("lm_head", 32000 * h, true)],
        first_layers: 0,
        first_layer: Vec::new(),
        moe: Some(Moe { experts, top_k: 2 }),
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
    let norms = || {
        vec![
            Tensor::new("input_layernorm", h, false),
            Tensor::new("post_attention_layernorm", h, false),
        ]
    };
    let mut first_layer = attention(h, 16, 16);
    first_layer.extend(mlp("mlp", dense, false));
    first_layer.extend(norms());
    let mut layer = attention(h, 16, 16);
    for e in 0..experts {
        layer.extend(mlp(&format!("mlp.experts.{e}"), ffn, true));
    }
    layer.push(Tensor::new("mlp.gate", experts as u64 * h, false));
    layer.extend(mlp("mlp.shared_experts", 2 * ffn, false));
    layer.extend(norms());
    Model {
        name: "deepseek-moe-16b".into(),
        layers: 28,
        hidden: h,
        vocab: 102400,
        param_dtype: DType::Bfloat16,
        grad_dtype: DType::Bfloat16,
        pre: vec![Tensor::new("embed_tokens", 102400 * h, true)],
        layer,
        post: vec![Tensor::new("norm", h, false), Tensor::new("lm_head", 102400 * h, true)],
        first_layers: 1,
        first_layer,
        moe: Some(Moe { experts, top_k: 6 }),
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
    let h = c.hidden;
    let kv = c.kv_heads * (h / c.heads);
    let i = c.intermediate;
    let layer = vec![
        Tensor::new("self_attn.q_proj", h * h, true),
        Tensor::new("self_attn.k_proj", h * kv, true),
        Tensor::new("self_attn.v_proj", h * kv, true),
        Tensor::new("self_attn.o_proj", h * h, true),
        Tensor::new("mlp.gate_proj", h * i, true),
        Tensor::new("mlp.up_proj", h * i, true),
        Tensor::new("mlp.down_proj", i * h, true),
        Tensor::new("input_layernorm", h, false),
        Tensor::new("post_attention_layernorm", h, false),
    ];
    let mut post = vec![Tensor::new("norm", h, false)];
    if !c.tied {
        post.push(Tensor::new("lm_head", c.vocab * h, true));
    }
    Model {
        name: name.into(),
        layers: c.layers,
        hidden: h,
        vocab: c.vocab,
        param_dtype: DType::Bfloat16,
        grad_dtype: DType::Bfloat16,
        pre: vec![Tensor::new("embed_tokens", c.vocab * h, true)],
        layer,
        post,
        first_layers: 0,
        first_layer: Vec::new(),
        moe: None,
    }
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
    Model {
        name: name.into(),
        layers,
        hidden: h,
        vocab,
        param_dtype: DType::Bfloat16,
        grad_dtype: DType::Bfloat16,
        pre: vec![
            Tensor::new("wte", vocab * h, true),
            Tensor::new("wpe", positions * h, false),
        ],
        layer,
        post: vec![Tensor::new("ln_f.weight", h, false), Tensor::new("ln_f.bias", h, false)],
        first_layers: 0,
        first_layer: Vec::new(),
        moe: None,
    }
}

/// The plain form's inputs (`--params N --layers L [--hidden H] [--vocab V]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlainSpec {
    pub params: u64,
    pub layers: usize,
    pub hidden: Option<u64>,
    pub vocab: Option<u64>,
    /// A mixture of experts: each layer's MLP as this many experts.
    pub experts: Option<usize>,
    /// Experts per token (default 2).
    pub top_k: Option<usize>,
}

/// `--model`: a preset, by name or alias (case-insensitive), known to
/// exist once parsed.
#[derive(Clone, Copy, Debug)]
pub struct PresetName(&'static Preset);

impl PartialEq for PresetName {
    fn eq(&self, other: &PresetName) -> bool {
        self.0.name == other.0.name
    }
}

impl PresetName {
    /// The preset's own name.
    pub fn name(self) -> &'static str {
        self.0.name
    }

    /// The preset's model.
    pub fn model(self) -> Model {
        (self.0.build)()
    }
}

impl std::str::FromStr for PresetName {
    type Err = String;

    fn from_str(name: &str) -> Result<PresetName, String> {
        let key = name.trim().to_ascii_lowercase();
        PRESETS
            .iter()
            .find(|p| p.name == key || p.aliases.contains(&key.as_str()))
            .map(PresetName)
            .ok_or_else(|| {
                let names: Vec<&str> = PRESETS.iter().map(|p| p.name).collect();
                format!(
                    "unknown model '{}' (presets: {}; or give --params and --layers)",
                    name.trim(),
                    names.join(", ")
                )
            })
    }
}

impl Model {
    /// A preset by name or alias (case-insensitive).
    pub fn preset(name: &str) -> Result<Model, Error> {
        name.parse::<PresetName>().map(PresetName::model).map_err(Error::Usage)
    }

    /// A model from a parameter count and a layer count.
    ///
    /// The hidden size is `--hidden` when given, else derived from the
    /// standard transformer layer of 12 h^2 parameters (4 h^2 attention,
    /// 8 h^2 MLP) plus a `vocab x h` embedding: the positive root of
    /// `12 L h^2 + V h = N`, rounded. The embedding (`vocab x hidden`, one
    /// tied matrix; none without `--vocab`) comes first; the rest is split
    /// evenly over the layers, and the remainder of that division (fewer
    /// than L parameters) is one last tensor, so the total is exact. Each
    /// layer is q, k, v, o of h^2 each, then the MLP's two matrices
    /// sharing what is left (the first takes the odd element); a layer too
    /// small for 4 h^2 is one tensor.
    pub fn plain(spec: PlainSpec) -> Result<Model, Error> {
        let PlainSpec { params, layers, .. } = spec;
        if layers == 0 {
            return Err(Error::usage("--layers must be at least 1"));
        }
        if params < layers as u64 {
            return Err(Error::usage(format!(
                "--params {params} is fewer than one parameter per layer for --layers {layers}"
            )));
        }
        let vocab = spec.vocab.unwrap_or(0);
        let hidden = match spec.hidden {
            Some(0) => return Err(Error::usage("--hidden must be at least 1")),
            Some(h) => h,
            None => derived_hidden(params, layers as u64, vocab),
        };
        let embedding = vocab.checked_mul(hidden).filter(|&e| e <= params).ok_or_else(|| {
            Error::usage(format!(
                "the embedding of --vocab {vocab} x hidden {hidden} is larger than --params {params}"
            ))
        })?;
        let body = params - embedding;
        let per_layer = body / layers as u64;
        if per_layer == 0 {
            return Err(Error::usage(format!(
                "--params {params} leaves nothing for --layers {layers} after the {embedding}-parameter embedding"
            )));
        }
        let mut pre = Vec::new();
        if embedding > 0 {
            pre.push(Tensor::new("embedding", embedding, true));
        }
        let mut post = Vec::new();
        let rest = body % layers as u64;
        if rest > 0 {
            post.push(Tensor::new("rest", rest, false));
        }
        let (layer, moe) = match spec.experts {
            None => (plain_layer(per_layer, hidden), None),
            Some(experts) => {
                let top_k = spec.top_k.unwrap_or(2);
                if experts == 0 || top_k == 0 || top_k > experts {
                    return Err(Error::usage(format!(
                        "--experts {experts} with --top-k {top_k}: a token goes to at least 1 and at most all of the experts"
                    )));
                }
                (
                    plain_moe_layer(per_layer, hidden, experts)?,
                    Some(Moe { experts, top_k }),
                )
            }
        };
        Ok(Model {
            name: "plain".to_string(),
            layers,
            hidden,
            vocab,
            param_dtype: DType::Bfloat16,
            grad_dtype: DType::Bfloat16,
            pre,
            layer,
            post,
            first_layers: 0,
            first_layer: Vec::new(),
            moe,
        })
    }

    /// Every parameter.
    pub fn params(&self) -> u64 {
        self.pre_params() + (0..self.layers).map(|i| self.layer_params_of(i)).sum::<u64>() + self.post_params()
    }

    /// Parameters of one of the (identical) layers after the first ones.
    pub fn layer_params(&self) -> u64 {
        self.layer.iter().map(|t| t.elements).sum()
    }

    /// Layer `i`'s tensors.
    pub fn layer_tensors(&self, i: usize) -> &[Tensor] {
        if i < self.first_layers {
            &self.first_layer
        } else {
            &self.layer
        }
    }

    /// Parameters of layer `i`.
    pub fn layer_params_of(&self, i: usize) -> u64 {
        self.layer_tensors(i).iter().map(|t| t.elements).sum()
    }

    pub fn pre_params(&self) -> u64 {
        self.pre.iter().map(|t| t.elements).sum()
    }

    pub fn post_params(&self) -> u64 {
        self.post.iter().map(|t| t.elements).sum()
    }

    /// Every tensor with its place, in `parameters()` (forward) order.
    pub fn tensors(&self) -> Vec<(Place, &Tensor)> {
        let mut out: Vec<(Place, &Tensor)> = self.pre.iter().map(|t| (Place::Pre, t)).collect();
        for i in 0..self.layers {
            out.extend(self.layer_tensors(i).iter().map(|t| (Place::Layer(i), t)));
        }
        out.extend(self.post.iter().map(|t| (Place::Post, t)));
        out
    }

    /// Sets the element types, checked to be floating point: gradients and
    /// parameters of a trained model are.
    pub fn with_dtypes(mut self, param: DType, grad: DType) -> Result<Model, Error> {
        for (what, t) in [("parameter", param), ("gradient", grad)] {
            if !matches!(t, DType::Half | DType::Bfloat16 | DType::Float | DType::Double) {
                return Err(Error::usage(format!(
                    "the {what} type must be a floating type (half, bfloat16, float, double), not {t}"
                )));
            }
        }
        self.param_dtype = param;
        self.grad_dtype = grad;
        Ok(self)
    }
}

/// The positive root of `12 L h^2 + V h = N`, at least 1.
fn derived_hidden(params: u64, layers: u64, vocab: u64) -> u64 {
    let (n, l, v) = (params as f64, layers as f64, vocab as f64);
    let h = (-v + (v * v + 48.0 * l * n).sqrt()) / (24.0 * l);
    (h.round() as u64).max(1)
}

/// A mixture-of-experts layer of `per_layer` parameters: q, k, v, o of
/// h^2, the router (experts x h), then the experts sharing what is left,
/// each two matrices (the first experts take the remainder, one element
/// each).
fn plain_moe_layer(per_layer: u64, hidden: u64, experts: usize) -> Result<Vec<Tensor>, Error> {
    let e = experts as u64;
    let square = hidden.saturating_mul(hidden);
    let dense = square.saturating_mul(4).saturating_add(e.saturating_mul(hidden));
    if dense.saturating_add(2 * e) > per_layer {
        return Err(Error::usage(format!(
            "a layer of {per_layer} parameters leaves nothing for {experts} experts after attention (4 x {hidden}^2) and the router: give more --params or fewer --experts"
        )));
    }
    let mut layer = vec![
        Tensor::new("attn.q", square, true),
        Tensor::new("attn.k", square, true),
        Tensor::new("attn.v", square, true),
        Tensor::new("attn.o", square, true),
        Tensor::new("router", e * hidden, false),
    ];
    let left = per_layer - dense;
    for i in 0..e {
        let mine = left / e + u64::from(i < left % e);
        layer.push(Tensor::expert(&format!("experts.{i}.in"), mine.div_ceil(2)));
        layer.push(Tensor::expert(&format!("experts.{i}.out"), mine / 2));
    }
    Ok(layer)
}

fn plain_layer(per_layer: u64, hidden: u64) -> Vec<Tensor> {
    let square = hidden.saturating_mul(hidden);
    if square.saturating_mul(4) >= per_layer {
        return vec![Tensor::new("layer", per_layer, true)];
    }
    let mlp = per_layer - 4 * square;
    vec![
        Tensor::new("attn.q", square, true),
        Tensor::new("attn.k", square, true),
        Tensor::new("attn.v", square, true),
        Tensor::new("attn.o", square, true),
        Tensor::new("mlp.in", mlp.div_ceil(2), true),
        Tensor::new("mlp.out", mlp / 2, true),
    ]
}

#[cfg(test)]
mod tests;
