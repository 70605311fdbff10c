//! collbench: a collective-communication benchmark in the tradition of
//! nccl-tests. See the README for usage and ../DESIGN.md for contracts.
//!
//! Layers: `cli` (clap only) -> `config` (validated input) -> `engine`
//! (plan, sweep, timing, validation) over a `world` (control plane) and a
//! `backend` (data plane), with `collective` descriptions and `report`
//! sinks. `unsafe` lives only in the FFI binding modules, which opt in:
//! `backend::mpi::raw` and `backend::nccl::sys`.
#![deny(unsafe_code)]

pub mod app;
pub mod backend;
pub mod buffer;
pub mod cli;
pub mod collective;
pub mod config;
pub mod engine;
pub mod error;
pub mod info;
pub mod report;
pub mod session;
pub mod suite;
pub mod topology;
pub mod types;
pub mod world;
