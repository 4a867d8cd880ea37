//! A RedisBloom filter as RedisBloom keeps it: a chain of plain Bloom filters ("links").
//!
//! Every link keeps the fields RedisBloom stores for it, so that a migrated filter probes the
//! same bits, grows into the same links and encodes back to the same bytes:
//!
//! ```text
//!   RbFilter { items, options, growth, links: [link 0 (oldest), link 1, ..., link n-1 (newest)] }
//!   Link     { entries, error, hashes, bpe, bits, n2, items, bytes, array }
//! ```
//!
//! A lookup scans links newest to oldest; an add answers false when any link has the item, else
//! sets its bits in the newest link, first pushing a new link when that one holds `entries` items.
//!
//! The fields of a link and of the chain, their limits and RedisBloom's sizing rule are in
//! [`super::shape`]; one link's bits and probes in [`super::link`].

use super::hash::{Hashing, RbHash};
use super::link::Link;
use super::shape::{
    link_shape, Arithmetic, ChainHeader, ChainShape, LinkShape, FORCE64, MAX_CHAIN_HASHES,
    MAX_LINKS, NOROUND, NO_SCALING,
};
use crate::budget::{admitted_parts, allocation_size, LimitError, MemoryBudget};
use crate::encoding::{ChunkError, DecodeError};
use crate::relocate::Walk;
use crate::scalable::InsertError;

/// What one add operation on a RedisBloom filter did, item by item, as
/// [`AddOutcome`](crate::scalable::AddOutcome) for our filters; filled as the operation goes.
/// The links it pushed are not recorded: they follow from the items by RedisBloom's own
/// deterministic rule, so a replica given the same items pushes the same links
/// ([`crate::replication`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RbAddOutcome {
    /// One entry per processed item, in order: true when it was new (and counted).
    pub added: Vec<bool>,
    /// What stopped the operation at item `added.len()`, if anything did.
    pub error: Option<InsertError>,
}

impl RbAddOutcome {
    /// Positions (in the batch) of the items that changed the filter.
    pub fn added_positions(&self) -> impl Iterator<Item = usize> + '_ {
        self.added
            .iter()
            .enumerate()
            .filter_map(|(position, &new)| new.then_some(position))
    }
}

/// A RedisBloom filter (see the module documentation for the layout and rules). Not `Clone`:
/// a copy allocates, after a budget admits it ([`try_clone`](Self::try_clone)).
#[derive(Debug, PartialEq)]
pub struct RbFilter {
    header: ChainHeader,
    /// Oldest first; never empty.
    links: Vec<Link>,
}

impl RbFilter {
    /// Assembles a filter from a validated shape and one array per link.
    pub(crate) fn from_parts(header: ChainHeader, links: Vec<Link>) -> RbFilter {
        debug_assert!(!links.is_empty());
        RbFilter { header, links }
    }

    /// A new, empty filter as RedisBloom 2.8.2 creates one (BF.RESERVE, BF.INSERT, or an add to
    /// a missing key): options NOROUND and FORCE64 (and NO_SCALING when `growth` is None), one
    /// link of `capacity` entries at `error_rate`, halved when the filter scales (RedisBloom
    /// tightens every link's error, the first included, so that the sum over links stays under
    /// the rate), after `budget` admits its array. None when RedisBloom could not size it
    /// either.
    pub fn new<B: MemoryBudget + ?Sized>(
        capacity: u64,
        error_rate: f64,
        growth: Option<u32>,
        budget: &mut B,
    ) -> Result<Option<RbFilter>, LimitError> {
        let options = NOROUND | FORCE64 | if growth.is_none() { NO_SCALING } else { 0 };
        let tightening = if growth.is_some() { 0.5 } else { 1.0 };
        let Some(link) = link_shape(capacity, error_rate * tightening, true) else {
            return Ok(None);
        };
        let shape = ChainShape {
            header: ChainHeader {
                items: 0,
                options,
                growth: growth.unwrap_or(2),
                arithmetic: Arithmetic::Wide,
            },
            links: vec![link],
        };
        if link.validate().is_err() || shape.validate().is_err() {
            return Ok(None);
        }
        match RbFilter::zeroed(&shape, budget) {
            Ok(filter) => Ok(Some(filter)),
            Err(DecodeError::Limit(limit)) => Err(limit),
            Err(DecodeError::Corrupt(_)) => Ok(None),
        }
    }

    /// A filter of a validated `shape` with all-zero bit arrays, after `budget` admits their
    /// allocation sizes (charged once, for all links).
    pub(crate) fn zeroed<B: MemoryBudget + ?Sized>(
        shape: &ChainShape,
        budget: &mut B,
    ) -> Result<RbFilter, DecodeError> {
        let links = admitted_parts(
            budget,
            shape.allocated_bytes(),
            shape.links.iter().map(|link| Link::zeroed(*link)),
        )
        .map_err(DecodeError::Limit)?;
        Ok(RbFilter::from_parts(shape.header, links))
    }

    /// A copy of this filter, its arrays allocated after `budget` admits them (COPY).
    pub fn try_clone<B: MemoryBudget + ?Sized>(
        &self,
        budget: &mut B,
    ) -> Result<RbFilter, LimitError> {
        let links = admitted_parts(
            budget,
            self.allocated_bytes(),
            self.links.iter().map(Link::try_clone),
        )?;
        Ok(RbFilter::from_parts(self.header, links))
    }

    pub fn header(&self) -> &ChainHeader {
        &self.header
    }

    pub fn links(&self) -> &[Link] {
        &self.links
    }

    /// The hash function the options select.
    pub fn hashing(&self) -> Hashing {
        if self.header.options & FORCE64 != 0 {
            Hashing::Murmur64
        } else {
            Hashing::Murmur32
        }
    }

    /// Items counted over all links (BF.CARD, "Number of items inserted").
    pub fn items(&self) -> u64 {
        self.header.items
    }

    /// Sum of the links' entries (BF.INFO "Capacity").
    pub fn capacity(&self) -> u64 {
        self.links
            .iter()
            .fold(0u64, |sum, link| sum.saturating_add(link.shape().entries))
    }

    /// Bytes of all bit arrays.
    pub fn bytes(&self) -> u64 {
        self.links.iter().map(|link| link.shape().bytes).sum()
    }

    /// Bytes the allocator hands out for all bit arrays (see [`LinkShape::allocated_bytes`]).
    pub fn allocated_bytes(&self) -> u64 {
        self.allocated_bytes_from(0)
    }

    /// [`allocated_bytes`](Self::allocated_bytes) of the links from index `first` on.
    pub fn allocated_bytes_from(&self, first: usize) -> u64 {
        self.links.iter().skip(first).fold(0u64, |sum, link| {
            sum.saturating_add(link.shape().allocated_bytes())
        })
    }

    /// Offers the links' array, then each link's bits, to a defrag walk ([`crate::relocate`]).
    pub(crate) fn relocate(&mut self, walk: &mut Walk) {
        walk.vec(&mut self.links);
        for link in &mut self.links {
            link.relocate(walk);
        }
    }

    /// Bytes the allocator hands out for this filter's own blocks: its links' array and their
    /// bits (the chain's record itself is inline in the key's value).
    pub fn heap_bytes(&self) -> u64 {
        allocation_size(std::mem::size_of_val(self.links()) as u64) + self.allocated_bytes()
    }

    pub fn is_scaling(&self) -> bool {
        self.header.options & NO_SCALING == 0
    }

    /// Hashes `item` under this filter's options.
    pub fn hash(&self, item: &[u8]) -> RbHash {
        RbHash::new(item, self.hashing())
    }

    /// True when `item` may have been added.
    pub fn contains(&self, item: &[u8]) -> bool {
        self.contains_hash(self.hash(item))
    }

    /// [`contains`](Self::contains) for a hashed item: links newest to oldest, as RedisBloom.
    pub fn contains_hash(&self, hash: RbHash) -> bool {
        let arithmetic = self.header.arithmetic;
        self.links
            .iter()
            .rev()
            .any(|link| link.contains(hash, arithmetic))
    }

    /// Adds `item`: Ok(false) when a link already has it, Ok(true) when its bits were set in the
    /// newest link (pushing a link first if that one was full, after `budget` admits it). On
    /// error nothing changed.
    pub fn insert<B: MemoryBudget + ?Sized>(
        &mut self,
        item: &[u8],
        budget: &mut B,
    ) -> Result<bool, InsertError> {
        self.insert_hash(self.hash(item), budget)
    }

    /// Adds a hashed item, pushing a link first if the newest is full: Ok(false) when a link
    /// already has it. On error nothing changed.
    fn insert_hash<B: MemoryBudget + ?Sized>(
        &mut self,
        hash: RbHash,
        budget: &mut B,
    ) -> Result<bool, InsertError> {
        if self.contains_hash(hash) {
            return Ok(false);
        }
        // The chain's count is the links' sum, and the decoders refuse a sum past u64: a chain
        // holding u64::MAX items takes no more, whatever its links could hold (a non-scaling
        // one's only link then holds them all, so it is full).
        let Some(items) = self.header.items.checked_add(1) else {
            return Err(if self.is_scaling() {
                InsertError::CannotGrow
            } else {
                InsertError::NonScalingFull
            });
        };
        let newest = self.links.last().expect("a filter always has a link");
        if newest.is_full() {
            self.grow(budget)?;
        }
        let arithmetic = self.header.arithmetic;
        let newest = self.links.last_mut().expect("a filter always has a link");
        newest.add(hash, arithmetic);
        self.header.items = items;
        Ok(true)
    }

    /// Looks up items in order, calling `found` with each answer.
    pub fn contains_many<'a>(
        &self,
        items: impl IntoIterator<Item = &'a [u8]>,
        mut found: impl FnMut(bool),
    ) {
        for item in items {
            found(self.contains(item));
        }
    }

    /// Adds items in order, recording each result in `outcome` as it goes; stops at the first
    /// error (as RedisBloom's BF.MADD stops at a full non-scaling filter). One operation:
    /// `budget` is charged for the sum of the links it pushes.
    pub fn insert_many<'a, B: MemoryBudget + ?Sized>(
        &mut self,
        items: impl IntoIterator<Item = &'a [u8]>,
        budget: &mut B,
        outcome: &mut RbAddOutcome,
    ) {
        for item in items {
            match self.insert_hash(self.hash(item), budget) {
                Ok(added) => outcome.added.push(added),
                Err(error) => {
                    outcome.error = Some(error);
                    return;
                }
            }
        }
    }

    fn newest(&self) -> &LinkShape {
        self.links
            .last()
            .expect("a filter always has a link")
            .shape()
    }

    /// The shape of the link this filter would push next, by RedisBloom 2.8.2's rule.
    pub fn next_link(&self) -> Result<LinkShape, InsertError> {
        if !self.is_scaling() {
            return Err(InsertError::NonScalingFull);
        }
        if self.links.len() >= MAX_LINKS {
            return Err(InsertError::CannotGrow);
        }
        let newest = self.newest();
        let entries = newest
            .entries
            .checked_mul(u64::from(self.header.growth))
            .ok_or(InsertError::CannotGrow)?;
        let link = link_shape(
            entries,
            newest.error * 0.5,
            self.header.options & NOROUND != 0,
        )
        .ok_or(InsertError::CannotGrow)?;
        // What growth makes, the decoders must take back: the new link passes their checks, and
        // so does the chain with it (its probes included).
        link.validate().map_err(|_| InsertError::CannotGrow)?;
        let hashes = self
            .links
            .iter()
            .map(|link| u64::from(link.shape().hashes))
            .sum::<u64>()
            + u64::from(link.hashes);
        if hashes > MAX_CHAIN_HASHES {
            return Err(InsertError::CannotGrow);
        }
        Ok(link)
    }

    /// The capacity of every link this filter holds or could push, by RedisBloom's rule,
    /// before its arrays would need more than `max_bytes` (BF.INFO MAXSCALEDCAPACITY).
    pub fn max_scaled_capacity(&self, max_bytes: u64) -> u64 {
        let mut capacity = self.capacity();
        let mut bytes = self.allocated_bytes();
        if !self.is_scaling() {
            return capacity;
        }
        let mut newest = *self.newest();
        for _ in self.links.len()..MAX_LINKS {
            let Some(next) = newest
                .entries
                .checked_mul(u64::from(self.header.growth))
                .and_then(|entries| {
                    link_shape(
                        entries,
                        newest.error * 0.5,
                        self.header.options & NOROUND != 0,
                    )
                })
                .filter(|link| link.validate().is_ok())
            else {
                break;
            };
            bytes = bytes.saturating_add(next.allocated_bytes());
            if bytes > max_bytes {
                break;
            }
            capacity = capacity.saturating_add(next.entries);
            newest = next;
        }
        capacity
    }

    /// Bytes of the array of the link this filter would push next; None when it cannot grow.
    /// A budget is charged its allocation size ([`LinkShape::allocated_bytes`]).
    pub fn next_link_bytes(&self) -> Option<u64> {
        self.next_link().ok().map(|link| link.bytes)
    }

    /// Pushes the next link, if `budget` admits its allocation size and the system gives the
    /// memory.
    fn grow<B: MemoryBudget + ?Sized>(&mut self, budget: &mut B) -> Result<(), InsertError> {
        let shape = self.next_link()?;
        let allocation = shape.allocated_bytes();
        budget
            .charge(
                self.allocated_bytes().saturating_add(allocation),
                allocation,
            )
            .map_err(InsertError::Limit)?;
        let link = Link::zeroed(shape).map_err(InsertError::Limit)?;
        self.links.push(link);
        Ok(())
    }

    /// Writes a SCANDUMP data chunk at byte `offset` of all arrays laid end to end. RedisBloom
    /// refuses a chunk that does not lie within one link, and so does this.
    pub fn write_bits(&mut self, offset: u64, data: &[u8]) -> Result<(), ChunkError> {
        let (link, start) = self.locate(offset).ok_or(ChunkError::Offset)?;
        let link = &mut self.links[link];
        if data.len() > link.shape().bytes as usize - start {
            return Err(ChunkError::TooBig);
        }
        link.write_bytes(start, data);
        Ok(())
    }

    /// The byte ranges `(offset, length)` of all arrays end to end, each within one link and at
    /// most `piece` long: how the arrays are saved and sent.
    pub fn pieces(&self, piece: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut start = 0;
        for link in &self.links {
            out.extend(
                crate::encoding::pieces(link.shape().bytes, piece)
                    .map(|(offset, len)| (start + offset, len)),
            );
            start += link.shape().bytes;
        }
        out
    }

    /// Copies `out.len()` bytes of the arrays end to end from byte `offset`; the range must lie
    /// within one link (see [`pieces`](Self::pieces)).
    pub fn read_bits(&self, offset: u64, out: &mut [u8]) -> Result<(), ChunkError> {
        let (link, start) = self.locate(offset).ok_or(ChunkError::Offset)?;
        let link = &self.links[link];
        if out.len() > link.shape().bytes as usize - start {
            return Err(ChunkError::TooBig);
        }
        link.read_bytes(start, out);
        Ok(())
    }

    /// The link holding byte `offset` of all arrays end to end, and the offset within it.
    pub(crate) fn locate(&self, mut offset: u64) -> Option<(usize, usize)> {
        for (index, link) in self.links.iter().enumerate() {
            if offset < link.shape().bytes {
                return Some((index, offset as usize));
            }
            offset -= link.shape().bytes;
        }
        None
    }
}
