//! Host buffers of a run-time element type: pattern fill, poisoning and
//! element-exact comparison against expected values.
//!
//! Storage is a `Vec` of 4 KiB pages aligned to 4 KiB, so every buffer
//! starts on a page boundary (as OSU's and IMB's do) and a typed view is a
//! safe `bytemuck` cast: no unsafe code. Two buffers therefore never sit at
//! a small offset from each other modulo the page size: a plain malloc'd
//! pair does (16 bytes apart below glibc's mmap threshold), and a receive
//! buffer a few bytes past its send buffer slows the reductions and copies
//! of an MPI library several times over on x86 (4K aliasing; issue 13,
//! docs/measurement.md). Backends use these buffers as their own memory
//! (mpi) or as staging for device copies (nccl).

use std::ops::Range;

use crate::error::Error;
use crate::types::DType;

/// A value of one element type, built from a validation pattern value.
pub trait Element: bytemuck::Pod + PartialEq {
    /// `v` is a non-negative integer within the type's `exact_max`.
    fn from_pattern(v: u64) -> Self;

    /// The value, for comparisons within a bound (avg on floating types).
    fn to_f64(self) -> f64;
}

macro_rules! int_element {
    ($($t:ty),*) => {$(
        impl Element for $t {
            fn from_pattern(v: u64) -> Self {
                // Patterns stay within DType::exact_max, so this never truncates.
                v as $t
            }

            fn to_f64(self) -> f64 {
                self as f64
            }
        }
    )*};
}
int_element!(i8, u8, i32, u32, i64, u64);

impl Element for f32 {
    fn from_pattern(v: u64) -> Self {
        v as f32
    }

    fn to_f64(self) -> f64 {
        f64::from(self)
    }
}

impl Element for f64 {
    fn from_pattern(v: u64) -> Self {
        v as f64
    }

    fn to_f64(self) -> f64 {
        self
    }
}

/// IEEE 754 binary16, stored as bits (the host never computes with it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(transparent)]
pub struct Half(pub u16);

impl Element for Half {
    fn from_pattern(v: u64) -> Self {
        // Integers up to 2^11 are exact: normalised with the leading one
        // dropped into the 10-bit mantissa.
        if v == 0 {
            return Half(0);
        }
        let e = 63 - v.leading_zeros() as u64;
        let mantissa = ((v << (10 - e.min(10))) >> e.saturating_sub(10)) & 0x3ff;
        Half((((e + 15) << 10) | mantissa) as u16)
    }

    fn to_f64(self) -> f64 {
        let (sign, e, m) = (
            self.0 >> 15,
            i32::from((self.0 >> 10) & 0x1f),
            f64::from(self.0 & 0x3ff),
        );
        let v = match e {
            0 => m * 2f64.powi(-24),
            31 if m == 0.0 => f64::INFINITY,
            31 => f64::NAN,
            _ => (1024.0 + m) * 2f64.powi(e - 25),
        };
        if sign == 1 { -v } else { v }
    }
}

/// bfloat16, stored as bits: the upper half of an f32.
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(transparent)]
pub struct Bf16(pub u16);

impl Element for Bf16 {
    fn from_pattern(v: u64) -> Self {
        // Integers up to 2^8 are exact, so the lower 16 bits are zero.
        Bf16(((v as f32).to_bits() >> 16) as u16)
    }

    fn to_f64(self) -> f64 {
        f64::from(f32::from_bits(u32::from(self.0) << 16))
    }
}

/// Calls `$body` with `$T` bound to the Rust type of `$dtype`.
#[macro_export]
macro_rules! with_element_type {
    ($dtype:expr, $T:ident => $body:expr) => {
        $crate::with_listed_type!($dtype, $T => $body;
            Int8 => i8, Uint8 => u8, Int32 => i32, Uint32 => u32, Int64 => i64,
            Uint64 => u64, Half => $crate::buffer::Half, Float => f32, Double => f64,
            Bfloat16 => $crate::buffer::Bf16)
    };
}

/// Calls `$body` with `$T` bound to the Rust type of `$dtype`, for the
/// element types listed (`Variant => type`), and `$otherwise` for the
/// types listed after them (`Variant | Variant => $otherwise`).
#[macro_export]
macro_rules! with_listed_type {
    ($dtype:expr, $T:ident => $body:expr; $($variant:ident => $ty:ty),+ $(; $($rest:ident)|+ => $otherwise:expr)?) => {
        match $dtype {
            $($crate::types::DType::$variant => {
                type $T = $ty;
                $body
            })+
            $($($crate::types::DType::$rest)|+ => $otherwise,)?
        }
    };
}

/// Elements per thread when `threads` threads fill or compare `len`
/// elements: one part below a million elements (threads cost more than they
/// save there).
fn part_len(len: usize, threads: usize) -> usize {
    const SERIAL_BELOW: usize = 1 << 20;
    if len < SERIAL_BELOW || threads <= 1 {
        return len.max(1);
    }
    len.div_ceil(threads).max(SERIAL_BELOW / 4)
}

/// Bytes of one page of a host buffer: buffers start on such a boundary.
pub const PAGE_BYTES: usize = 4096;

/// One page of storage; its alignment makes the `Vec`'s allocation
/// page-aligned (the global allocator honours any alignment a type asks for).
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C, align(4096))]
struct Page([u8; PAGE_BYTES]);

impl std::fmt::Debug for Page {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Page")
    }
}

/// A host buffer of `len` elements of `dtype`, starting on a page boundary.
#[derive(Debug)]
pub struct HostBuffer {
    dtype: DType,
    len: usize,
    pages: Vec<Page>,
    /// Threads for `fill` and `count_mismatches` on large ranges: 1 unless
    /// the owner knows the cores are free (an MPI rank's peers on the same
    /// host busy-poll, so extra threads there only slow everyone down).
    threads: usize,
}

impl HostBuffer {
    /// Zero-filled; a failed allocation is an error, not an abort.
    pub fn new(dtype: DType, len: usize) -> Result<HostBuffer, Error> {
        let bytes = len
            .checked_mul(dtype.size_bytes())
            .ok_or_else(|| Error::Runtime(format!("a buffer of {len} {dtype} elements is too large")))?;
        let npages = bytes.div_ceil(PAGE_BYTES);
        let mut pages = Vec::new();
        pages.try_reserve_exact(npages).map_err(|_| {
            Error::Runtime(format!(
                "cannot allocate {bytes} bytes of host memory for a {dtype} buffer"
            ))
        })?;
        // Every page is written: untouched pages all map to the kernel's one
        // zero page, which reads faster than memory would.
        pages.resize(npages, bytemuck::Zeroable::zeroed());
        Ok(HostBuffer {
            dtype,
            len,
            pages,
            threads: 1,
        })
    }

    /// Lets `fill` and `count_mismatches` use up to `threads` threads on
    /// large ranges.
    pub fn with_threads(mut self, threads: usize) -> HostBuffer {
        self.threads = threads.clamp(1, 64);
        self
    }

    /// Makes this `len` elements of `dtype`, reusing the memory when it is
    /// large enough; the contents are then unspecified. A larger buffer is
    /// allocated after the old one is freed, so peak memory stays at what
    /// one point needs.
    pub fn reshape(&mut self, dtype: DType, len: usize) -> Result<(), Error> {
        let fits = len
            .checked_mul(dtype.size_bytes())
            .is_some_and(|bytes| bytes.div_ceil(PAGE_BYTES) <= self.pages.len());
        if fits {
            self.dtype = dtype;
            self.len = len;
        } else {
            *self = HostBuffer::new(dtype, 0)?;
            *self = HostBuffer::new(dtype, len)?;
        }
        Ok(())
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn bytes(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.pages)[..self.len * self.dtype.size_bytes()]
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        let n = self.len * self.dtype.size_bytes();
        &mut bytemuck::cast_slice_mut(&mut self.pages)[..n]
    }

    /// Typed view; `T` must be the buffer's element type.
    pub fn typed<T: Element>(&self) -> &[T] {
        debug_assert_eq!(size_of::<T>(), self.dtype.size_bytes());
        &bytemuck::cast_slice(&self.pages)[..self.len]
    }

    pub fn typed_mut<T: Element>(&mut self) -> &mut [T] {
        debug_assert_eq!(size_of::<T>(), self.dtype.size_bytes());
        &mut bytemuck::cast_slice_mut(&mut self.pages)[..self.len]
    }

    /// Where the buffer starts, as an address (for alignment checks).
    pub fn address(&self) -> usize {
        self.pages.as_ptr() as usize
    }

    /// Elements `range` take `value(i)` for `i` in `0..range.len()`. Large
    /// ranges are filled by several threads where `with_threads` allows (a
    /// GiB-sized check must not dominate a sweep).
    pub fn fill(&mut self, range: Range<usize>, value: impl Fn(usize) -> u64 + Sync) {
        with_element_type!(self.dtype, T => {
            let part = part_len(range.len(), self.threads);
            std::thread::scope(|scope| {
                for (k, chunk) in self.typed_mut::<T>()[range].chunks_mut(part).enumerate() {
                    let value = &value;
                    let mut job = move || {
                        for (i, x) in chunk.iter_mut().enumerate() {
                            *x = T::from_pattern(value(k * part + i));
                        }
                    };
                    if k == 0 { job() } else { scope.spawn(job); }
                }
            });
        })
    }

    /// Every byte 0xFF: NaN for floating types, the all-ones integer for the
    /// others, a value no validation pattern produces.
    pub fn poison(&mut self) {
        self.bytes_mut().fill(0xff);
    }

    /// Number of elements in `range` that differ from `expected(i)`, `i`
    /// counting from the start of the range.
    pub fn count_mismatches(&self, range: Range<usize>, expected: impl Fn(usize) -> u64 + Sync) -> u64 {
        with_element_type!(self.dtype, T => {
            let part = part_len(range.len(), self.threads);
            let count = |k: usize, chunk: &[T]| -> u64 {
                chunk
                    .iter()
                    .enumerate()
                    .filter(|(i, x)| **x != T::from_pattern(expected(k * part + *i)))
                    .count() as u64
            };
            std::thread::scope(|scope| {
                let mut chunks = self.typed::<T>()[range].chunks(part).enumerate();
                let first = chunks.next();
                let others: Vec<_> = chunks.map(|(k, c)| scope.spawn(move || count(k, c))).collect();
                let mut total = first.map_or(0, |(k, c)| count(k, c));
                for h in others {
                    // A worker only compares; it cannot panic short of a bug.
                    total += h.join().unwrap_or(0);
                }
                total
            })
        })
    }
}

impl HostBuffer {
    /// Elements of `range` farther than `relative * want` from `want`
    /// (NaN included), where `want` is `expected(i)` as a number.
    pub fn count_outside(&self, range: Range<usize>, expected: impl Fn(usize) -> u64 + Sync, relative: f64) -> u64 {
        with_element_type!(self.dtype, T => {
            self.typed::<T>()[range]
                .iter()
                .enumerate()
                .filter(|(i, x)| {
                    let want = expected(*i) as f64;
                    let got = x.to_f64();
                    // NaN is never within: the comparison is false
                    let within = (got - want).abs() <= relative * want.abs();
                    !within
                })
                .count() as u64
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bounded_comparison_allows_rounding_and_nothing_more() {
        let mut b = HostBuffer::new(DType::Half, 4).unwrap();
        b.fill(0..4, |i| 1000 + i as u64);
        assert_eq!(b.count_outside(0..4, |i| 1000 + i as u64, 0.0), 0);
        // 1001 -> 1002 is 0.1% off
        b.fill(1..2, |_| 1002);
        assert_eq!(b.count_outside(0..4, |i| 1000 + i as u64, 1e-4), 1);
        assert_eq!(b.count_outside(0..4, |i| 1000 + i as u64, 2e-3), 0);
        b.poison();
        assert_eq!(
            b.count_outside(0..4, |i| 1000 + i as u64, 1.0),
            4,
            "NaN is never within a bound"
        );
    }

    #[test]
    fn half_encodes_small_integers_exactly() {
        // reference bit patterns of IEEE binary16
        assert_eq!(Half::from_pattern(0).0, 0x0000);
        assert_eq!(Half::from_pattern(1).0, 0x3c00);
        assert_eq!(Half::from_pattern(2).0, 0x4000);
        assert_eq!(Half::from_pattern(3).0, 0x4200);
        assert_eq!(Half::from_pattern(10).0, 0x4900);
        assert_eq!(Half::from_pattern(1024).0, 0x6400);
        assert_eq!(Half::from_pattern(2047).0, 0x67ff);
        assert_eq!(Half::from_pattern(2048).0, 0x6800);
    }

    #[test]
    fn bfloat16_encodes_small_integers_exactly() {
        assert_eq!(Bf16::from_pattern(1).0, 0x3f80);
        assert_eq!(Bf16::from_pattern(3).0, 0x4040);
        assert_eq!(Bf16::from_pattern(255).0, 0x437f);
    }

    #[test]
    fn fill_then_compare_finds_exactly_the_changed_elements() {
        for dtype in DType::ALL {
            let mut b = HostBuffer::new(dtype, 100).unwrap();
            b.fill(0..100, |i| (i % 50) as u64);
            assert_eq!(b.count_mismatches(0..100, |i| (i % 50) as u64), 0, "{dtype}");
            b.bytes_mut()[dtype.size_bytes() * 7] ^= 0x01;
            b.bytes_mut()[dtype.size_bytes() * 99 + dtype.size_bytes() - 1] ^= 0x40;
            assert_eq!(b.count_mismatches(0..100, |i| (i % 50) as u64), 2, "{dtype}");
            assert_eq!(b.count_mismatches(10..20, |i| (10 + i % 50) as u64), 0, "{dtype}");
        }
    }

    #[test]
    fn poisoned_buffers_match_no_pattern_value() {
        for dtype in DType::ALL {
            let mut b = HostBuffer::new(dtype, 8).unwrap();
            b.poison();
            for v in [0, 1, 2, dtype.exact_max() - 1] {
                assert_eq!(b.count_mismatches(0..8, |_| v), 8, "{dtype} {v}");
            }
        }
    }

    #[test]
    fn large_ranges_fill_and_compare_in_parallel_exactly_as_in_serial() {
        let n = (1 << 21) + 12345;
        let mut b = HostBuffer::new(DType::Int32, n + 10).unwrap().with_threads(4);
        b.poison();
        b.fill(10..n + 10, |i| (i % 1000) as u64);
        assert_eq!(b.count_mismatches(10..n + 10, |i| (i % 1000) as u64), 0);
        assert_eq!(b.typed::<i32>()[10 + n - 1], ((n - 1) % 1000) as i32);
        assert_eq!(b.typed::<i32>()[9], -1, "fill stayed inside its range");
        b.typed_mut::<i32>()[10 + (1 << 20) + 7] = -5;
        b.typed_mut::<i32>()[10 + n - 1] = -5;
        assert_eq!(b.count_mismatches(10..n + 10, |i| (i % 1000) as u64), 2);
    }

    #[test]
    fn reshaping_reuses_memory_that_is_large_enough() {
        let mut b = HostBuffer::new(DType::Double, 4).unwrap();
        let at = b.address();
        b.reshape(DType::Int8, 32).unwrap();
        assert_eq!(
            (b.dtype(), b.len(), b.pages.len(), b.address()),
            (DType::Int8, 32, 1, at)
        );
        b.reshape(DType::Float, 1024).unwrap();
        assert_eq!((b.len(), b.pages.len(), b.address()), (1024, 1, at));
        b.reshape(DType::Float, 1025).unwrap();
        assert_eq!((b.len(), b.pages.len()), (1025, 2));
        b.reshape(DType::Float, 9).unwrap();
        b.fill(0..9, |i| i as u64);
        assert_eq!(b.count_mismatches(0..9, |i| i as u64), 0);
    }

    #[test]
    fn every_buffer_starts_on_a_page_boundary_whatever_its_size_and_history() {
        // Sizes on both sides of glibc's mmap threshold (128 KiB, which
        // moves up after a large free), odd sizes, and growth by reshaping.
        let mut kept = Vec::new();
        for len in [1, 3, 4, 1000, 4097, 16 << 10, 100_000, 1 << 20, (4 << 20) + 5] {
            for dtype in [DType::Int8, DType::Half, DType::Float, DType::Double] {
                let b = HostBuffer::new(dtype, len).unwrap();
                assert_eq!(b.address() % PAGE_BYTES, 0, "{dtype} x {len}");
                assert_eq!(b.bytes().as_ptr() as usize, b.address());
                kept.push(b);
            }
        }
        // a pair allocated one after the other (send, then receive) never
        // sits at a small offset from each other modulo the page size
        for pair in kept.windows(2) {
            assert_eq!(pair[1].address().abs_diff(pair[0].address()) % PAGE_BYTES, 0);
        }
        let mut b = HostBuffer::new(DType::Float, 0).unwrap();
        for len in [1usize, 64, 1 << 10, 1 << 15, 1 << 18, 1 << 21, 16, 1 << 22] {
            b.reshape(DType::Float, len).unwrap();
            assert_eq!(b.address() % PAGE_BYTES, 0, "reshaped to {len}");
        }
    }

    #[test]
    fn poisoning_stops_at_the_buffer_end_and_a_reshaped_buffer_poisons_what_it_holds() {
        let mut b = HostBuffer::new(DType::Int32, 2000).unwrap();
        b.fill(0..2000, |_| 7);
        b.reshape(DType::Int32, 10).unwrap();
        b.poison();
        assert_eq!(b.count_mismatches(0..10, |_| 7), 10);
        b.reshape(DType::Int32, 20).unwrap();
        assert_eq!(
            b.count_mismatches(10..20, |_| 7),
            0,
            "bytes past the old end are untouched"
        );
    }

    #[test]
    fn impossible_allocations_are_errors() {
        assert!(HostBuffer::new(DType::Double, usize::MAX / 4).is_err());
    }
}
