//! Unit tests of `model`.

use super::*;

/// The plain form's inputs without experts.
fn plain(params: u64, layers: usize, hidden: Option<u64>, vocab: Option<u64>) -> PlainSpec {
    PlainSpec {
        params,
        layers,
        hidden,
        vocab,
        experts: None,
        top_k: None,
    }
}

#[test]
fn presets_have_their_published_parameter_counts() {
    let want = [
        ("gpt2", 124_439_808, 12),
        ("tinyllama-1.1b", 1_100_048_384, 22),
        ("llama-3.2-1b", 1_235_814_400, 16),
        ("llama-2-7b", 6_738_415_616, 32),
        ("mistral-7b", 7_241_732_096, 32),
        ("llama-3-8b", 8_030_261_248, 32),
        ("llama-2-70b", 68_976_648_192, 80),
        ("llama-3-70b", 70_553_706_496, 80),
        ("deepseek-moe-16b", 16_375_728_128, 28),
        ("mixtral-8x7b", 46_702_792_704, 32),
    ];
    assert_eq!(PRESETS.len(), want.len());
    for (name, params, layers) in want {
        let m = Model::preset(name).unwrap();
        assert_eq!(m.params(), params, "{name}");
        assert_eq!(m.layers, layers, "{name}");
        assert_eq!(m.name, name);
        let listed: u64 = m.tensors().iter().map(|(_, t)| t.elements).sum();
        assert_eq!(listed, params, "{name}");
    }
}

#[test]
fn a_llama_layer_follows_the_config_shapes() {
    let m = Model::preset("llama-3-8b").unwrap();
    let shapes: Vec<u64> = m.layer.iter().map(|t| t.elements).collect();
    // q 4096x4096, k and v 4096x1024 (8 kv heads of 128), o, gate, up, down, 2 norms
    assert_eq!(
        shapes,
        vec![
            16_777_216, 4_194_304, 4_194_304, 16_777_216, 58_720_256, 58_720_256, 58_720_256, 4096, 4096
        ]
    );
    assert_eq!(m.pre[0].elements, 128_256 * 4096);
    assert_eq!(m.post.len(), 2, "untied: final norm and lm_head");
    let tied = Model::preset("llama-3.2-1b").unwrap();
    assert_eq!(tied.post.len(), 1, "tied embeddings have no separate lm_head");
}

#[test]
fn presets_resolve_by_alias_and_unknown_names_list_the_presets() {
    assert_eq!(Model::preset("TinyLlama").unwrap().name, "tinyllama-1.1b");
    assert_eq!(Model::preset(" llama2-7b ").unwrap().name, "llama-2-7b");
    let err = Model::preset("llama-9").unwrap_err();
    assert_eq!(err.exit_code(), 2);
    let msg = err.to_string();
    assert!(
        msg.starts_with("unknown model 'llama-9' (presets: gpt2, tinyllama-1.1b,"),
        "{msg}"
    );
    assert!(msg.ends_with("or give --params and --layers)"), "{msg}");
}

#[test]
fn the_plain_form_splits_the_rest_evenly_over_layers_and_keeps_the_total() {
    let spec = plain(7_000_000_003, 32, Some(4096), Some(32000));
    let m = Model::plain(spec).unwrap();
    assert_eq!(m.params(), 7_000_000_003);
    assert_eq!(m.pre_params(), 32000 * 4096);
    let body = 7_000_000_003 - 32000 * 4096;
    assert_eq!(m.layer_params(), body / 32);
    assert_eq!(m.post_params(), body % 32);
    assert_eq!(m.layer[0].elements, 4096 * 4096);
    assert_eq!(m.layer.len(), 6);
}

#[test]
fn the_plain_form_derives_the_hidden_size_from_twelve_h_squared_per_layer() {
    // 32 layers of 12 x 4096^2 and a 32000 x 4096 embedding
    let n = 32 * 12 * 4096 * 4096 + 32000 * 4096;
    let spec = plain(n, 32, None, Some(32000));
    let m = Model::plain(spec).unwrap();
    assert_eq!(m.hidden, 4096);
    assert_eq!(m.params(), n);
    // without a vocabulary: sqrt(7e9 / (12 x 32)) = 4269.6
    let spec = plain(7_000_000_000, 32, None, None);
    let m = Model::plain(spec).unwrap();
    assert_eq!(m.hidden, 4270);
    assert!(m.pre.is_empty());
    assert_eq!(m.params(), 7_000_000_000);
}

#[test]
fn a_layer_too_small_for_its_attention_is_one_tensor() {
    let spec = plain(1000, 4, Some(64), None);
    let m = Model::plain(spec).unwrap();
    assert_eq!(m.layer.len(), 1);
    assert_eq!(m.params(), 1000);
}

#[test]
fn impossible_plain_forms_are_one_line_usage_errors() {
    let cases = [
        (plain(1000, 0, None, None), "--layers must be at least 1"),
        (
            plain(3, 4, None, None),
            "--params 3 is fewer than one parameter per layer for --layers 4",
        ),
        (plain(1000, 1, Some(0), None), "--hidden must be at least 1"),
        (
            plain(1000, 1, Some(64), Some(32000)),
            "the embedding of --vocab 32000 x hidden 64 is larger than --params 1000",
        ),
        (
            plain(2048, 4, Some(64), Some(32)),
            "--params 2048 leaves nothing for --layers 4 after the 2048-parameter embedding",
        ),
    ];
    for (s, want) in cases {
        let err = Model::plain(s).unwrap_err();
        assert_eq!(err.to_string(), want);
        assert_eq!(err.exit_code(), 2);
    }
}

#[test]
fn element_types_must_be_floating() {
    let m = Model::preset("gpt2").unwrap();
    let m = m.with_dtypes(DType::Bfloat16, DType::Float).unwrap();
    assert_eq!((m.param_dtype, m.grad_dtype), (DType::Bfloat16, DType::Float));
    let err = m.with_dtypes(DType::Int32, DType::Float).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the parameter type must be a floating type (half, bfloat16, float, double), not int32"
    );
}

#[test]
fn tensor_parallel_shards_split_matrices_and_keep_norms() {
    let m = Model::preset("gpt2").unwrap();
    let wte = &m.pre[0];
    assert_eq!(wte.shard_elements(2), (50257 * 768_u64).div_ceil(2));
    assert_eq!(
        m.pre[1].shard_elements(2),
        1024 * 768,
        "position embeddings are replicated"
    );
    assert_eq!(m.layer[0].shard_elements(4), 768, "norms are replicated");
    assert_eq!(m.layer[2].shard_elements(4), 768 * 3 * 768 / 4);
}

#[test]
fn moe_presets_mark_their_experts_and_deepseek_has_a_dense_first_layer() {
    let m = Model::preset("mixtral-8x7b").unwrap();
    assert_eq!(m.moe, Some(Moe { experts: 8, top_k: 2 }));
    let experts: u64 = m.layer.iter().filter(|t| t.expert).map(|t| t.elements).sum();
    assert_eq!(experts, 8 * 3 * 4096 * 14336, "8 experts of w1, w2, w3");
    assert_eq!(m.layer.iter().filter(|t| t.name == "block_sparse_moe.gate").count(), 1);
    let d = Model::preset("deepseek-moe-16b").unwrap();
    assert_eq!(d.moe, Some(Moe { experts: 64, top_k: 6 }));
    assert_eq!(d.first_layers, 1);
    assert!(d.first_layer.iter().all(|t| !t.expert));
    assert_eq!(d.layer_params_of(0), 4 * 2048 * 2048 + 3 * 2048 * 10944 + 2 * 2048);
    // 64 routed experts of 3 x 2048 x 1408, the router, shared experts of 2816
    assert_eq!(
        d.layer_params_of(1),
        4 * 2048 * 2048 + 64 * 3 * 2048 * 1408 + 64 * 2048 + 3 * 2048 * 2816 + 2 * 2048
    );
}

#[test]
fn the_plain_form_with_experts_splits_each_mlp_into_experts_and_keeps_the_total() {
    let spec = PlainSpec {
        params: 2_000_003,
        layers: 2,
        hidden: Some(64),
        vocab: Some(100),
        experts: Some(4),
        top_k: None,
    };
    let m = Model::plain(spec).unwrap();
    assert_eq!(m.params(), 2_000_003);
    assert_eq!(m.moe, Some(Moe { experts: 4, top_k: 2 }));
    // per layer (2_000_003 - 6400) / 2 = 996_801: attention 4 x 64^2,
    // router 4 x 64, four experts of the rest
    let experts: Vec<u64> = m.layer.iter().filter(|t| t.expert).map(|t| t.elements).collect();
    assert_eq!(experts.len(), 8);
    assert_eq!(experts.iter().sum::<u64>(), 996_801 - 4 * 4096 - 256);
    let e = Model::plain(PlainSpec {
        experts: Some(4),
        top_k: Some(5),
        ..spec
    })
    .unwrap_err();
    assert!(e.to_string().contains("at most all of the experts"), "{e}");
    let e = Model::plain(PlainSpec {
        params: 20_000,
        vocab: None,
        ..spec
    })
    .unwrap_err();
    assert!(e.to_string().contains("leaves nothing for 4 experts"), "{e}");
}
