//! Same plan on every rank: before the first collective, ranks compare a
//! digest of everything that shapes the sequence of collective calls. A
//! mismatch (mpirun's MPMD form, a config file that differs between nodes,
//! two collbench versions) would otherwise hang or corrupt the run.

use crate::error::Error;
use crate::world::World;

/// Longest value text shown in a mismatch message.
const SHOWN_BYTES: usize = 200;

/// FNV-1a: stable across builds and platforms, unlike std's hasher.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The first field, in `fields` order, on which some rank differs from
/// rank 0, with the lowest such rank. `hashes` is rank-major.
pub fn first_mismatch(hashes: &[u64], nfields: usize) -> Option<(usize, usize)> {
    let nranks = hashes.len().checked_div(nfields)?;
    (0..nfields).find_map(|f| {
        (1..nranks)
            .find(|&r| hashes[r * nfields + f] != hashes[f])
            .map(|r| (f, r))
    })
}

/// Compares `fields` across ranks; the same error on every rank when they
/// differ. Collective over `world`.
pub fn check_same_plan(world: &dyn World, fields: &[(String, String)]) -> Result<(), Error> {
    // What says how many fields there are first, so that every exchange
    // has the same length on every rank: the version (another version
    // may have other fields), the command (another command has other
    // options) and the field count.
    let head = |i: usize| fields.get(i).map_or(0, |(_, v)| fnv1a(v.as_bytes()));
    let heads = world.all_gather_u64s(&[head(0), head(1), fields.len() as u64]);
    let mismatch = match first_mismatch(&heads, 3) {
        Some((f, rank)) => Some((f.min(1), rank)),
        None => {
            let hashes: Vec<u64> = fields.iter().map(|(_, v)| fnv1a(v.as_bytes())).collect();
            first_mismatch(&world.all_gather_u64s(&hashes), fields.len())
        }
    };
    let Some((field, rank)) = mismatch else {
        return Ok(());
    };
    let (name, value) = &fields[field];
    let values = world.all_gather_text(value, SHOWN_BYTES);
    Err(Error::usage(format!(
        "ranks run different plans: {name} is {} on rank 0 but {} on rank {rank}; \
         every rank must get the same options (check an MPMD command line or per-node config files)",
        values[0], values[rank]
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_mismatch_names_the_first_field_then_the_lowest_rank() {
        // 3 ranks x 4 fields
        let same = [1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4];
        assert_eq!(first_mismatch(&same, 4), None);
        let differ = [1, 2, 3, 4, 1, 2, 9, 4, 1, 7, 3, 8];
        assert_eq!(first_mismatch(&differ, 4), Some((1, 2)));
        let late = [1, 2, 3, 4, 1, 2, 3, 5, 1, 2, 3, 5];
        assert_eq!(first_mismatch(&late, 4), Some((3, 1)));
        assert_eq!(first_mismatch(&[5], 1), None);
        assert_eq!(first_mismatch(&[], 0), None);
    }

    #[test]
    fn ranks_running_different_commands_are_told_apart_without_a_hang() {
        let worlds = crate::world::threads::ThreadWorld::create(3);
        let field = |k: &str, v: &str| (k.to_string(), v.to_string());
        let errors: Vec<String> = std::thread::scope(|s| {
            let handles: Vec<_> = worlds
                .iter()
                .enumerate()
                .map(|(rank, world)| {
                    s.spawn(move || {
                        let mut fields = vec![field("collbench version", "0.1.0"), field("command", "run")];
                        if rank == 2 {
                            // another command, with more options than run's
                            fields = vec![field("collbench version", "0.1.0"), field("command", "links")];
                            fields.extend((0..5).map(|i| field(&format!("--x{i}"), "1")));
                        }
                        check_same_plan(world, &fields).unwrap_err().to_string()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for e in &errors {
            assert!(e.contains("command is run on rank 0 but links on rank 2"), "{e}");
        }
    }

    #[test]
    fn the_hash_is_stable_and_tells_values_apart() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_ne!(fnv1a(b"1048576"), fnv1a(b"2097152"));
    }
}
