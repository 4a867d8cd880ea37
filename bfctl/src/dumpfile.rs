//! The `bfctl dump` file format: the BF.SCANDUMP replies of one filter, framed.
//!
//! ```text
//!  magic    8 bytes  "BFCTLDMP"
//!  version  u32 LE   1
//!  keylen   u32 LE   length of the key the dump was taken from (informational)
//!  key      keylen bytes
//!  records, each:
//!    iterator  u64 LE  the iterator BF.SCANDUMP returned with this data (non-zero), which is the
//!                      one BF.LOADCHUNK wants with it
//!    length    u64 LE  bytes of data that follow (at most MAX_RECORD)
//!    data      length bytes, verbatim
//!  end record: iterator 0, length 0
//!  count    u64 LE   number of records before the end record
//! ```
//! Nothing may follow the count. The data is passed to BF.LOADCHUNK untouched; the module's own
//! chunk checksums protect it, the end record and the count catch truncated files.
//!
//! A partitioned filter (docs/partitions.md) is saved as its descriptor, then one dump as
//! above per partition, in partition order:
//!
//! ```text
//!  magic    8 bytes  "BFCTLPRT"
//!  version  u32 LE   1
//!  argc     u32 LE   number of arguments that follow
//!  args     argc × (u32 LE length, bytes): the descriptor's BF.RESERVE arguments after its
//!                    name (ε N PARTITIONS P routing_seed [NONSCALING | EXPANSION x | WINDOW ms])
//!  parts    u32 LE   P
//!  P dumps  "BFCTLDMP" … count, each as above (only the last may end the file)
//! ```
//! The descriptor's arguments, not its bits, are saved: BF.SCANDUMP does not read a descriptor,
//! and its partition keys follow from the name it is restored under.

use std::io::{self, Read, Seek, SeekFrom, Write};
use std::ops::Range;

use anyhow::{bail, Context, Result};

pub const MAGIC: &[u8; 8] = b"BFCTLDMP";
pub const VERSION: u32 = 1;
pub const PARTITIONED_MAGIC: &[u8; 8] = b"BFCTLPRT";
/// Most arguments and partitions a partitioned dump may declare.
const MAX_ARGS: u32 = 64;
const MAX_ARG: u32 = 1 << 16;
const MAX_PARTS: u32 = 4096;
/// Largest record accepted on reading (module chunks are at most 16 MiB plus a checksum).
pub const MAX_RECORD: u64 = 256 << 20;
const MAX_KEY: u32 = 512 << 20;

pub struct Writer<W: Write> {
    w: W,
    count: u64,
}

impl<W: Write> Writer<W> {
    pub fn new(mut w: W, key: &[u8]) -> Result<Self> {
        w.write_all(MAGIC)?;
        w.write_all(&VERSION.to_le_bytes())?;
        w.write_all(
            &u32::try_from(key.len())
                .context("key too long")?
                .to_le_bytes(),
        )?;
        w.write_all(key)?;
        Ok(Writer { w, count: 0 })
    }

    pub fn record(&mut self, iterator: u64, data: &[u8]) -> Result<()> {
        if iterator == 0 {
            bail!("a record's iterator cannot be 0");
        }
        self.w.write_all(&iterator.to_le_bytes())?;
        self.w.write_all(&(data.len() as u64).to_le_bytes())?;
        self.w.write_all(data)?;
        self.count += 1;
        Ok(())
    }

    pub fn finish(mut self) -> Result<W> {
        self.w.write_all(&0u64.to_le_bytes())?;
        self.w.write_all(&0u64.to_le_bytes())?;
        self.w.write_all(&self.count.to_le_bytes())?;
        self.w.flush()?;
        Ok(self.w)
    }
}

/// Writes the head of a partitioned dump: the descriptor's BF.RESERVE arguments and P; the P
/// partition dumps follow, each through a [`Writer`].
pub fn write_partitioned_head(w: &mut impl Write, args: &[Vec<u8>], parts: u32) -> Result<()> {
    w.write_all(PARTITIONED_MAGIC)?;
    w.write_all(&VERSION.to_le_bytes())?;
    w.write_all(
        &u32::try_from(args.len())
            .context("too many arguments")?
            .to_le_bytes(),
    )?;
    for a in args {
        w.write_all(
            &u32::try_from(a.len())
                .context("argument too long")?
                .to_le_bytes(),
        )?;
        w.write_all(a)?;
    }
    w.write_all(&parts.to_le_bytes())?;
    Ok(())
}

/// A dump file as [`open`] found it.
pub enum Dump<R: Read> {
    /// One filter's records.
    Plain(Reader<R>),
    /// A partitioned filter: the descriptor's BF.RESERVE arguments after its name, P, and the
    /// input positioned at the first partition's dump (read each with [`Reader::section`]).
    Partitioned {
        args: Vec<Vec<u8>>,
        parts: u32,
        r: R,
    },
}

fn read_u32(r: &mut impl Read, what: &str) -> Result<u32> {
    let mut b = [0u8; 4];
    read_exact_or(r, &mut b, what)?;
    Ok(u32::from_le_bytes(b))
}

/// Reads a dump file's head: a plain dump or a partitioned one.
pub fn open<R: Read>(mut r: R) -> Result<Dump<R>> {
    let mut magic = [0u8; 8];
    read_exact_or(&mut r, &mut magic, "the file header")?;
    if &magic == MAGIC {
        return Ok(Dump::Plain(Reader::after_magic(r, true)?));
    }
    if &magic != PARTITIONED_MAGIC {
        bail!("not a bfctl dump file (bad magic)");
    }
    let version = read_u32(&mut r, "the file header")?;
    if version != VERSION {
        bail!("unsupported bfctl dump version {version} (this bfctl reads version {VERSION})");
    }
    let argc = read_u32(&mut r, "the descriptor")?;
    if argc > MAX_ARGS {
        bail!("corrupt dump file ({argc} descriptor arguments)");
    }
    let mut args = Vec::new();
    for _ in 0..argc {
        let len = read_u32(&mut r, "the descriptor")?;
        if len > MAX_ARG {
            bail!("corrupt dump file (descriptor argument of {len} bytes)");
        }
        let mut a = vec![0u8; len as usize];
        read_exact_or(&mut r, &mut a, "the descriptor")?;
        args.push(a);
    }
    let parts = read_u32(&mut r, "the partition count")?;
    if !(1..=MAX_PARTS).contains(&parts) {
        bail!("corrupt dump file ({parts} partitions)");
    }
    Ok(Dump::Partitioned { args, parts, r })
}

pub struct Reader<R: Read> {
    r: R,
    count: u64,
    position: u64,
    done: bool,
    /// Whether the input must end with this dump.
    last: bool,
    pub key: Vec<u8>,
}

fn read_exact_or(r: &mut impl Read, buf: &mut [u8], what: &str) -> Result<()> {
    r.read_exact(buf).map_err(|e| {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            anyhow::anyhow!("truncated dump file (while reading {what})")
        } else {
            anyhow::Error::new(e).context(format!("reading {what}"))
        }
    })
}

impl<R: Read> Reader<R> {
    /// One of the dumps of a partitioned file; `last` when the file must end with it.
    pub fn section(r: R, last: bool) -> Result<Self> {
        Self::read(r, last)
    }

    fn read(mut r: R, last: bool) -> Result<Self> {
        let mut magic = [0u8; 8];
        read_exact_or(&mut r, &mut magic, "the file header")?;
        if &magic != MAGIC {
            bail!("not a bfctl dump file (bad magic)");
        }
        Self::after_magic(r, last)
    }

    fn after_magic(mut r: R, last: bool) -> Result<Self> {
        let mut head = [0u8; 8];
        read_exact_or(&mut r, &mut head, "the file header")?;
        let version = u32::from_le_bytes(head[..4].try_into().unwrap());
        if version != VERSION {
            bail!("unsupported bfctl dump version {version} (this bfctl reads version {VERSION})");
        }
        let klen = u32::from_le_bytes(head[4..8].try_into().unwrap());
        if klen > MAX_KEY {
            bail!("corrupt dump file (key length {klen})");
        }
        let mut key = vec![0u8; klen as usize];
        read_exact_or(&mut r, &mut key, "the key")?;
        Ok(Reader {
            r,
            count: 0,
            position: 16 + u64::from(klen),
            done: false,
            last,
            key,
        })
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// The next (iterator, data) record, or None after the end record (whose count is checked).
    pub fn next_record(&mut self) -> Result<Option<(u64, Vec<u8>)>> {
        let mut data = Vec::new();
        Ok(self.next_record_into(&mut data)?.map(|it| (it, data)))
    }

    /// [`Reader::next_record`] into `data` (whose allocation is reused): the record's
    /// iterator, or None after the end record.
    pub fn next_record_into(&mut self, data: &mut Vec<u8>) -> Result<Option<u64>> {
        let Some((iterator, len)) = self.record_head()? else {
            return Ok(None);
        };
        data.clear();
        data.resize(len as usize, 0);
        read_exact_or(&mut self.r, data, "record data")?;
        self.position += len;
        Ok(Some(iterator))
    }

    /// The next record's (iterator, length), its data still to read; or None after the end
    /// record, whose count is checked (and, for the last dump, that nothing follows it).
    fn record_head(&mut self) -> Result<Option<(u64, u64)>> {
        if self.done {
            return Ok(None);
        }
        let mut head = [0u8; 16];
        read_exact_or(&mut self.r, &mut head, "a record header")?;
        let iterator = u64::from_le_bytes(head[..8].try_into().unwrap());
        let len = u64::from_le_bytes(head[8..].try_into().unwrap());
        self.position += 16;
        if iterator == 0 {
            if len != 0 {
                bail!("corrupt dump file (end record with length {len})");
            }
            let mut count = [0u8; 8];
            read_exact_or(&mut self.r, &mut count, "the record count")?;
            let count = u64::from_le_bytes(count);
            if count != self.count {
                bail!(
                    "corrupt dump file (it says {count} records, {} were read)",
                    self.count
                );
            }
            let mut extra = [0u8; 1];
            if self.last && self.r.read(&mut extra)? != 0 {
                bail!("corrupt dump file (data after the end)");
            }
            self.position += 8;
            self.done = true;
            return Ok(None);
        }
        if len > MAX_RECORD {
            bail!("corrupt dump file (record of {len} bytes)");
        }
        self.count += 1;
        Ok(Some((iterator, len)))
    }
}

impl<R: Read + Seek> Reader<R> {
    /// Reads the dump's record headers and seeks past their data, with every check of
    /// [`Reader::next_record`] but the data's own (the module checks its chunks); `size` is
    /// the input's length, which no record may pass. Answers the dump's length in bytes.
    fn skip_all(&mut self, size: u64, start: u64) -> Result<u64> {
        while let Some((_, len)) = self.record_head()? {
            let data_start = start.saturating_add(self.position);
            if data_start.checked_add(len).is_none_or(|end| end > size) {
                bail!("truncated dump file (while reading record data)");
            }
            let skip = i64::try_from(len).context("record length")?;
            self.r.seek(SeekFrom::Current(skip))?;
            self.position += len;
        }
        Ok(self.position)
    }
}

/// Where each of the `parts` dumps of a partitioned file lies: `r` is positioned at the first
/// one (as [`open`] left it) and holds `size` bytes in all. Every dump's head, record headers,
/// end record and count are checked as [`Reader::section`] and [`Reader::next_record`] would,
/// and the last must end the file, so a truncated or corrupt file is refused before anything
/// is loaded; the records' data is skipped, not read.
pub fn sections<R: Read + Seek>(mut r: R, parts: u32, size: u64) -> Result<Vec<Range<u64>>> {
    let mut start = r.stream_position()?;
    let mut found = Vec::with_capacity(parts as usize);
    for i in 0..parts {
        let mut dump =
            Reader::section(&mut r, false).with_context(|| format!("read partition {i}"))?;
        let len = dump
            .skip_all(size, start)
            .with_context(|| format!("read partition {i}"))?;
        let end = start.checked_add(len).context("dump offsets overflow")?;
        found.push(start..end);
        start = end;
    }
    if start != size {
        bail!("corrupt dump file (data after the end)");
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_truncation() {
        let mut w = Writer::new(Vec::new(), b"k").unwrap();
        w.record(1, b"header").unwrap();
        w.record(9, b"").unwrap();
        let bytes = w.finish().unwrap();
        let mut r = Reader::section(&bytes[..], true).unwrap();
        assert_eq!(r.key, b"k");
        assert_eq!(r.next_record().unwrap(), Some((1, b"header".to_vec())));
        assert_eq!(r.next_record().unwrap(), Some((9, Vec::new())));
        assert_eq!(r.next_record().unwrap(), None);
        assert_eq!(r.position(), bytes.len() as u64);
        for cut in 0..bytes.len() {
            let mut ok = true;
            match Reader::section(&bytes[..cut], true) {
                Err(_) => ok = false,
                Ok(mut r) => loop {
                    match r.next_record() {
                        Err(_) => {
                            ok = false;
                            break;
                        }
                        Ok(None) => break,
                        Ok(Some(_)) => {}
                    }
                },
            }
            assert!(!ok, "a file cut at {cut} was accepted");
        }
        let mut more = bytes.clone();
        more.push(0);
        let mut r = Reader::section(&more[..], true).unwrap();
        r.next_record().unwrap();
        r.next_record().unwrap();
        assert!(r.next_record().is_err());
    }

    #[test]
    fn sections_are_found_and_every_cut_is_refused() {
        let mut file = Vec::new();
        write_partitioned_head(&mut file, &[b"0.01".to_vec()], 3).unwrap();
        let head = file.len() as u64;
        let mut ends = Vec::new();
        for p in 0..3u64 {
            let mut w = Writer::new(&mut file, format!("k{p}").as_bytes()).unwrap();
            for r in 0..p + 1 {
                w.record(r + 1, &vec![p as u8; 1000 * r as usize]).unwrap();
            }
            w.finish().unwrap();
            ends.push(file.len() as u64);
        }
        let scan = |bytes: &[u8]| {
            let mut r = io::Cursor::new(bytes);
            match open(&mut r)? {
                Dump::Partitioned { parts, r, .. } => sections(r, parts, bytes.len() as u64),
                Dump::Plain(_) => bail!("plain"),
            }
        };
        let found = scan(&file).unwrap();
        assert_eq!(found, [head..ends[0], ends[0]..ends[1], ends[1]..ends[2]]);
        for cut in 0..file.len() {
            assert!(
                scan(&file[..cut]).is_err(),
                "a file cut at {cut} was accepted"
            );
        }
        let mut more = file.clone();
        more.push(0);
        assert!(scan(&more).is_err());
    }
}
