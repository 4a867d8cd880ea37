//! Reserving an empty filter like an existing one, so that BF.MERGE ([`Filter::merge`]) takes
//! the two: the way to tomorrow's filter alike to today's, whose seeds were drawn at random.
//!
//! ```text
//!   plain, same slot (or one server):  BF.RESERVE new LIKE old
//!   plain, slots differ (a cluster):   BF.SCANDUMP old 0  ->  BF.RESERVE new ε n growth SEED s SHAPE b k l
//!   partitioned old (P, routing R):    for each i: BF.SCANDUMP old/i 0  ->
//!                                        BF.RESERVE new/i ε n growth SEED s SHAPE b k l PARTITION i P R
//!                                      then BF.RESERVE new ε N PARTITIONS P R growth (old's descriptor)
//! ```
//!
//! The explicit form is the one a primary replicates a creation with: every parameter BF.MERGE
//! compares (kind, error rate, capacity, expansion or window, tightening, seed, the first layer's
//! or the slots' exact shape, partition identity) read from the key's own BF.SCANDUMP header
//! with the core that wrote it, so nothing depends on the server's defaults, seed mode or
//! sizing code. Partition i of two names sit on different slots, where `LIKE` is CROSSSLOT.

use redis::Cmd;
use rustbloom_core::replication::Creation;
use rustbloom_core::StoredFilter;

use super::merge::{descriptor_cmd, exists, header};
use super::reply::info_pairs;
use super::reserve::PartitionedReserve;
use super::{info_cmd, key_cmd, Filter, Partitioning};
use crate::connection::Connection;
use crate::error::{Error, Result};
use crate::routing::{key_slot, partition_keys};
use crate::transport::{block, Transport};

/// The refusal of a model kept in another module's format, in the words `BF.RESERVE … LIKE`
/// answers it with on one slot: no command here creates such a filter, and BF.MERGE refuses it.
const FOREIGN: &str =
    "LIKE takes a filter made here, not one kept in RedisBloom's or valkey-bloom's format";

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

impl Filter {
    /// Creates an empty filter at `name` made as the one at `model` was, so that the two merge
    /// ([`Filter::merge`]): a plain filter with `BF.RESERVE name LIKE model` when the two keys
    /// share a slot (always on one server), else with every parameter explicit, read from
    /// `model`'s BF.SCANDUMP header; a partitioned filter with `model`'s descriptor (partitions,
    /// routing seed, capacity, growth) and each partition made as `model`'s partition of the
    /// same index. A `name` that is taken (or a key its partitions need) is the server's `item
    /// exists`, and the partitions created before are deleted again, as [`Filter::reserve`] does.
    /// A missing `model` is `not found`, a missing partition of it [`Error::MissingPartition`],
    /// and a model kept in RedisBloom's or valkey-bloom's format is refused as `LIKE` refuses it.
    pub fn reserve_like(conn: &mut Connection, name: &[u8], model: &[u8]) -> Result<Filter> {
        let cluster = conn.is_cluster();
        block(Filter::reserve_like_on(conn, name, model, cluster))
    }

    pub(crate) async fn reserve_like_on(
        conn: &mut impl Transport,
        name: &[u8],
        model: &[u8],
        cluster: bool,
    ) -> Result<Filter> {
        let reply = conn.send_one(&info_cmd(model)).await;
        let pairs = match &reply {
            Ok(v) => info_pairs(v.clone())?,
            Err(_) => Vec::new(),
        };
        let Some(found) = Filter::from_info(model, reply)? else {
            return Err(Error::Server("not found".into()));
        };
        let Some(routing) = found.partitioning else {
            let cmd = if !cluster || key_slot(name) == key_slot(model) {
                let mut cmd = key_cmd("BF.RESERVE", name);
                cmd.arg("LIKE").arg(model);
                cmd
            } else {
                explicit_reserve(name, &header(conn, model).await?)?
            };
            conn.send_one(&cmd).await?;
            return Ok(Filter::plain(name));
        };
        let keys = partition_keys(name, routing.partitions);
        let mut partitions = Vec::with_capacity(keys.len());
        // One header at a time: each decodes to a whole all-zero filter of the partition's size
        // (bfctl's resident memory grows by about that much), dropped before the next.
        for (index, (source, key)) in (0u32..).zip(routing.keys.iter().zip(&keys)) {
            if !exists(conn, source).await? {
                return Err(Error::MissingPartition {
                    name: text(model),
                    index,
                    key: text(source),
                });
            }
            let stored = header(conn, source).await?;
            let identity = stored
                .partition()
                .map(|p| (p.index(), p.count(), p.routing_seed()));
            if identity != Some((index, routing.partitions, routing.routing_seed)) {
                return Err(Error::Inconsistent(format!(
                    "\"{}\" is not partition {index} of {} with routing seed {}, as the \
                     descriptor of \"{}\" says",
                    text(source),
                    routing.partitions,
                    routing.routing_seed,
                    text(model)
                )));
            }
            partitions.push(explicit_reserve(key, &stored)?);
        }
        let plan = PartitionedReserve {
            partitions,
            descriptor: descriptor_cmd(name, &pairs)?,
            filter: Filter {
                name: name.to_vec(),
                partitioning: Some(Partitioning {
                    partitions: routing.partitions,
                    routing_seed: routing.routing_seed,
                    keys,
                }),
            },
        };
        plan.run(conn).await
    }
}

/// `BF.RESERVE key ε n growth [TIGHTENING r] SEED s SHAPE bits hashes layout [PARTITION i P R]`:
/// an empty filter made as `model` was, as a primary replicates a creation.
fn explicit_reserve(key: &[u8], model: &StoredFilter) -> Result<Cmd> {
    let creation = Creation::of(model.filter());
    let args = match creation {
        Creation::RedisBloom { .. } | Creation::ValkeyBloom { .. } => None,
        Creation::Scalable { .. } | Creation::Window { .. } => {
            creation.reserve_args(model.partition())
        }
    };
    let args = args.ok_or_else(|| Error::Server(FOREIGN.into()))?;
    let mut cmd = key_cmd("BF.RESERVE", key);
    for arg in args {
        cmd.arg(arg);
    }
    Ok(cmd)
}

#[cfg(test)]
mod tests {
    use rustbloom_core::partition::Partition;
    use rustbloom_core::scalable::TIGHTENING_RATIO;
    use rustbloom_core::Growth as LayerGrowth;
    use rustbloom_core::{BloomFilter, Filter as CoreFilter, FilterParams, Unlimited};
    use rustbloom_core::{WindowFilter, WindowParams};

    use super::*;

    fn args(cmd: &Cmd) -> String {
        cmd.args_iter()
            .map(|a| match a {
                redis::Arg::Simple(b) => String::from_utf8_lossy(b).into_owned(),
                _ => String::new(),
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn scalable(growth: LayerGrowth, tightening: f64) -> StoredFilter {
        let params = FilterParams {
            capacity: 1000,
            error_rate: 0.001,
            growth,
            seed: 7,
            tightening,
        };
        let filter = BloomFilter::new(params, &mut Unlimited).expect("a filter");
        StoredFilter::ready_filter(CoreFilter::Scalable(filter))
    }

    /// The shape `model`'s first layer (or slots) has, as SHAPE gives it.
    fn shape_of(model: &StoredFilter) -> String {
        let shape = match Creation::of(model.filter()) {
            Creation::Scalable { first_layer, .. } => first_layer,
            Creation::Window { slot, .. } => slot,
            other => panic!("{other:?}"),
        };
        format!(
            "{} {} {}",
            shape.bits,
            shape.num_hashes,
            shape.layout.lines()
        )
    }

    #[test]
    fn every_parameter_merge_compares_is_explicit() {
        let model = scalable(LayerGrowth::Scaling { expansion: 4 }, 0.7);
        let shape = shape_of(&model);
        let cmd = explicit_reserve(b"new", &model).expect("a command");
        assert_eq!(
            args(&cmd),
            format!("BF.RESERVE new 0.001 1000 EXPANSION 4 TIGHTENING 0.7 SEED 7 SHAPE {shape}")
        );
        // The default ratio is left out, as a primary replicates it; a partition's identity
        // comes last.
        let model = scalable(LayerGrowth::NonScaling, TIGHTENING_RATIO)
            .with_partition(Partition::new(2, 4, 99).expect("a partition"))
            .expect("a partition's seed");
        let shape = shape_of(&model);
        let cmd = explicit_reserve(b"new/2", &model).expect("a command");
        assert_eq!(
            args(&cmd),
            format!("BF.RESERVE new/2 0.001 1000 NONSCALING SEED 7 SHAPE {shape} PARTITION 2 4 99")
        );
    }

    #[test]
    fn a_window_keeps_its_window_and_slot_shape() {
        let params = WindowParams {
            error_rate: 0.01,
            capacity: 500,
            window_ms: 60000,
            seed: 3,
        };
        let window = WindowFilter::new(params, 0, &mut Unlimited).expect("a window");
        let model = StoredFilter::ready_filter(CoreFilter::Window(Box::new(window)));
        let shape = shape_of(&model);
        let cmd = explicit_reserve(b"w", &model).expect("a command");
        assert_eq!(
            args(&cmd),
            format!("BF.RESERVE w 0.01 500 WINDOW 60000 SEED 3 SHAPE {shape}")
        );
    }
}
