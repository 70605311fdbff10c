//! The call of an `NCCL CALL` trace line (`ncclAllReduce(...)`), as a
//! `Line`.

use super::{CallLine, CutLine, InitLine, Line, Origin, Source, SplitOf, hex};

/// `ncclAllReduce(7f5d92a00000,7f5d93400000,10485760,0,0,0,0x55d8c12613d0,0x55d8c09207b0)`.
pub(super) fn parse_trace(prefix: Origin, number: usize, body: &str) -> Line {
    let Some((func, args)) = body.split_once('(') else {
        return Line::Other;
    };
    let Some(name) = func.trim().strip_prefix("nccl") else {
        return Line::Other;
    };
    let complete = args.trim_end().ends_with(')');
    let args: Vec<&str> = args
        .trim_end()
        .trim_end_matches(')')
        .split(',')
        .map(str::trim)
        .collect();
    let collective = is_traced_call(name);
    if !complete {
        if collective || name.starts_with("Comm") {
            return Line::Cut(CutLine {
                prefix,
                name: name.to_string(),
                comm: None,
                missing: "the closing parenthesis".into(),
                malformed: false,
            });
        }
        return Line::Other;
    }
    let int = |i: usize| args.get(i).and_then(|v| v.parse::<i64>().ok());
    match name {
        "CommInitRank" if args.len() == 5 => trace_init_rank(prefix, &args),
        "CommSplit" if args.len() == 6 => trace_split(prefix, &args),
        _ if collective && args.len() == 8 => {
            let (Some(count), Some(datatype), Some(op), Some(root)) =
                (args[2].parse::<u64>().ok(), int(3), int(4), int(5))
            else {
                return Line::Other;
            };
            Line::Call(CallLine {
                line: number,
                prefix,
                name: name.to_string(),
                op_count: None,
                count,
                datatype,
                op,
                root,
                comm: hex(args[6]),
                nranks: None,
                global_rank: None,
                source: Source::Trace,
                at: (),
            })
        }
        _ => Line::Other,
    }
}

/// Whether a traced function (its name after `nccl`) is a collective or
/// point-to-point call.
fn is_traced_call(name: &str) -> bool {
    matches!(
        name,
        "AllReduce"
            | "AllGather"
            | "ReduceScatter"
            | "Broadcast"
            | "Reduce"
            | "Send"
            | "Recv"
            | "AlltoAll"
            | "Gather"
            | "Scatter"
    )
}

/// A traced communicator: its call's whole line, nothing more known yet.
fn traced_init(prefix: Origin, comm: u64, rank: i64, nranks: i64) -> InitLine {
    InitLine {
        prefix,
        comm,
        rank: rank as usize,
        nranks: nranks as usize,
        cuda_dev: None,
        comm_id: None,
        split: None,
        cut: false,
    }
}

/// A traced `ncclCommInitRank(comm, nranks, id, rank, dev)` (five arguments).
fn trace_init_rank(prefix: Origin, args: &[&str]) -> Line {
    let int = |i: usize| args.get(i).and_then(|v| v.parse::<i64>().ok());
    let (Some(comm), Some(nranks), Some(rank)) = (hex(args[0]), int(1), int(3)) else {
        return Line::Other;
    };
    Line::Init(InitLine {
        cuda_dev: int(4).and_then(|d| u32::try_from(d).ok()),
        comm_id: hex(args[2]),
        ..traced_init(prefix, comm, rank, nranks)
    })
}

/// A traced `ncclCommSplit(parent, color, key, comm, rank, nranks)` (six
/// arguments).
fn trace_split(prefix: Origin, args: &[&str]) -> Line {
    let int = |i: usize| args.get(i).and_then(|v| v.parse::<i64>().ok());
    let (Some(parent), Some(color), Some(key), Some(comm), Some(rank), Some(nranks)) =
        (hex(args[0]), int(1), int(2), hex(args[3]), int(4), int(5))
    else {
        return Line::Other;
    };
    Line::Init(InitLine {
        split: Some(SplitOf {
            parent,
            count: None,
            color,
            key,
        }),
        ..traced_init(prefix, comm, rank, nranks)
    })
}
