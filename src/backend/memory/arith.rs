//! The arithmetic of the memory backend: a rank's output of each
//! collective from every rank's input, and reductions in each element
//! type (integers wrap as NCCL's do, 16-bit floats go through f32 and
//! round to nearest even).

use crate::backend::Call;
use crate::buffer::{Bf16, Half, HostBuffer};
use crate::collective::{Collective, Peers};
use crate::types::ReduceOp;

/// This rank's output of `call` from every rank's input (`inputs[r]` is
/// rank `r`'s input region, `out` this rank's output region).
pub(super) fn compute<T: Arith>(call: &Call, inputs: &[HostBuffer], out: &mut [T]) {
    let (n, c, rank, root) = (call.at.nranks, call.shape.count, call.at.rank, call.at.root);
    let input = |r: usize| inputs[r].typed::<T>();
    let op = call.op.unwrap_or(ReduceOp::Sum);
    let reduce = |i: usize| {
        let mut acc = input(0)[i];
        for r in 1..n {
            acc = acc.combine(input(r)[i], op);
        }
        if op == ReduceOp::Avg { acc.average(n) } else { acc }
    };
    match call.collective {
        Collective::AllReduce | Collective::Reduce => {
            for (i, x) in out.iter_mut().enumerate() {
                *x = reduce(i);
            }
        }
        Collective::ReduceScatter => {
            for (i, x) in out.iter_mut().enumerate() {
                *x = reduce(rank * c + i);
            }
        }
        Collective::Broadcast => out.copy_from_slice(&input(root)[..out.len()]),
        Collective::AllGather | Collective::Gather => {
            for (p, block) in out.chunks_mut(c.max(1)).enumerate() {
                block.copy_from_slice(&input(p)[..block.len()]);
            }
        }
        Collective::AllToAll => {
            for (p, block) in out.chunks_mut(c.max(1)).enumerate() {
                block.copy_from_slice(&input(p)[rank * c..rank * c + block.len()]);
            }
        }
        Collective::AllToAllV => {
            let peers = Peers::of(&call.shape, n);
            let mut at = 0;
            for p in 0..n {
                let (len, from) = (peers.count(p, rank), peers.send_offset(p, rank));
                out[at..at + len].copy_from_slice(&input(p)[from..from + len]);
                at += len;
            }
        }
        Collective::Scatter => out.copy_from_slice(&input(root)[rank * c..rank * c + out.len()]),
        Collective::SendRecv => out.copy_from_slice(&input((rank + n - call.at.shift % n) % n)[..out.len()]),
    }
}

/// The arithmetic of reductions, in each element type.
pub(super) trait Arith: crate::buffer::Element + Copy {
    fn combine(self, other: Self, op: ReduceOp) -> Self;
    /// This sum over `n` ranks, divided by `n`.
    fn average(self, n: usize) -> Self;
}

macro_rules! int_arith {
    ($($t:ty),*) => {$(
        impl Arith for $t {
            fn combine(self, other: Self, op: ReduceOp) -> Self {
                // NCCL's integer arithmetic wraps.
                match op {
                    ReduceOp::Sum | ReduceOp::Avg => self.wrapping_add(other),
                    ReduceOp::Prod => self.wrapping_mul(other),
                    ReduceOp::Min => self.min(other),
                    ReduceOp::Max => self.max(other),
                }
            }

            fn average(self, n: usize) -> Self {
                self / (n.max(1) as $t)
            }
        }
    )*};
}
int_arith!(i8, u8, i32, u32, i64, u64);

macro_rules! float_arith {
    ($($t:ty),*) => {$(
        impl Arith for $t {
            fn combine(self, other: Self, op: ReduceOp) -> Self {
                match op {
                    ReduceOp::Sum | ReduceOp::Avg => self + other,
                    ReduceOp::Prod => self * other,
                    ReduceOp::Min => self.min(other),
                    ReduceOp::Max => self.max(other),
                }
            }

            fn average(self, n: usize) -> Self {
                self / (n.max(1) as $t)
            }
        }
    )*};
}
float_arith!(f32, f64);

impl Arith for Half {
    fn combine(self, other: Self, op: ReduceOp) -> Self {
        Half(f32_to_half(half_to_f32(self).combine(half_to_f32(other), op)))
    }

    fn average(self, n: usize) -> Self {
        Half(f32_to_half(half_to_f32(self).average(n)))
    }
}

impl Arith for Bf16 {
    fn combine(self, other: Self, op: ReduceOp) -> Self {
        Bf16(f32_to_bf16(bf16_to_f32(self).combine(bf16_to_f32(other), op)))
    }

    fn average(self, n: usize) -> Self {
        Bf16(f32_to_bf16(bf16_to_f32(self).average(n)))
    }
}

fn half_to_f32(h: Half) -> f32 {
    // Every binary16 value is an f32 value.
    crate::buffer::Element::to_f64(h) as f32
}

fn bf16_to_f32(b: Bf16) -> f32 {
    f32::from_bits(u32::from(b.0) << 16)
}

/// `x` as binary16, rounded to nearest even (IEEE 754); beyond 65504
/// rounds to infinity, NaN stays NaN.
fn f32_to_half(x: f32) -> u16 {
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exp = ((bits >> 23) & 0xff) as i32;
    let man = bits & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if man != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    // Keeps `kept = m >> shift` and rounds on what the shift drops.
    let round = |m: u32, shift: u32| {
        let kept = m >> shift;
        let dropped = m & ((1 << shift) - 1);
        let half = 1 << (shift - 1);
        kept + u32::from(dropped > half || (dropped == half && kept & 1 == 1))
    };
    if e <= 0 {
        // subnormal: value = m10 * 2^-24, so m10 = (1.man as 24 bits) >> (14 - e)
        if e < -10 {
            return sign;
        }
        return sign | round(man | 0x80_0000, (14 - e) as u32) as u16;
    }
    // a carry out of the mantissa moves into the exponent, as it should
    sign | (((e as u32) << 10) + round(man, 13)) as u16
}

/// `x` as bfloat16 (the upper half of an f32), rounded to nearest even.
fn f32_to_bf16(x: f32) -> u16 {
    let bits = x.to_bits();
    if x.is_nan() {
        return ((bits >> 16) | 0x40) as u16;
    }
    ((bits + 0x7fff + ((bits >> 16) & 1)) >> 16) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sixteen_bit_floats_round_to_nearest_even() {
        for (x, bits) in [
            (0.0, 0x0000),
            (1.0, 0x3c00),
            (-2.0, 0xc000),
            (65504.0, 0x7bff),
            (65520.0, 0x7c00),
            (2049.0, 0x6800),
            (2051.0, 0x6802),
            (2f32.powi(-24), 0x0001),
            (2f32.powi(-14), 0x0400),
            (f32::INFINITY, 0x7c00),
        ] {
            assert_eq!(f32_to_half(x), bits, "{x}");
        }
        assert!(half_to_f32(Half(f32_to_half(f32::NAN))).is_nan());
        for v in 0..=2048u16 {
            assert_eq!(half_to_f32(Half(f32_to_half(f32::from(v)))), f32::from(v));
        }
        assert_eq!(f32_to_bf16(1.0), 0x3f80);
        assert_eq!(f32_to_bf16(257.0), 0x4380, "257 ties to even 256");
        assert_eq!(f32_to_bf16(259.0), 0x4382, "259 ties to even 260");
        assert!(f32::from_bits(u32::from(f32_to_bf16(f32::NAN)) << 16).is_nan());
    }
}
