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

mod presets;

pub use presets::PRESETS;

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

/// The preset's own name (the digest compares it, whatever alias was typed).
impl serde::Serialize for PresetName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
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
    /// A model of `layers` identical layers (no different first ones, no
    /// experts) with bfloat16 parameters and gradients.
    fn uniform(
        name: &str,
        layers: usize,
        hidden: u64,
        vocab: u64,
        pre: Vec<Tensor>,
        layer: Vec<Tensor>,
        post: Vec<Tensor>,
    ) -> Model {
        Model {
            name: name.into(),
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
            moe: None,
        }
    }

    /// The strategies' tests' model `small`: `uniform` with a vocabulary
    /// of 2 and float gradients.
    #[cfg(test)]
    pub(crate) fn for_tests(
        layers: usize,
        hidden: u64,
        pre: Vec<Tensor>,
        layer: Vec<Tensor>,
        post: Vec<Tensor>,
    ) -> Model {
        Model {
            grad_dtype: DType::Float,
            ..Model::uniform("small", layers, hidden, 2, pre, layer, post)
        }
    }

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
            moe,
            ..Model::uniform("plain", layers, hidden, vocab, pre, layer, post)
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
