//! Writing a file bfctl makes (`build`, `dump`): complete or not at all under its name.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// Writes `out` through `write`: into a temporary file beside it, renamed onto it once complete
/// (so a failure never leaves a truncated file under its name); `-` is stdout. Something there
/// that is not a regular file (`/dev/null`, a FIFO) is written in place, never renamed over: a
/// rename onto `/dev/null` would replace the device with a file for the whole machine.
pub fn write_file<T>(out: &Path, write: impl FnOnce(&mut dyn Write) -> Result<T>) -> Result<T> {
    if out == Path::new("-") {
        let mut sink = BufWriter::with_capacity(1 << 20, io::stdout().lock());
        return finish(write(&mut sink), sink);
    }
    let special = std::fs::metadata(out).is_ok_and(|m| !m.is_file() && !m.is_dir());
    if special {
        let file = OpenOptions::new()
            .write(true)
            .open(out)
            .with_context(|| format!("open {}", out.display()))?;
        let mut sink = BufWriter::with_capacity(1 << 20, file);
        return finish(write(&mut sink), sink);
    }
    let mut tmp = out.as_os_str().to_owned();
    tmp.push(format!(".bfctl-tmp-{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let file = File::create(&tmp).with_context(|| format!("create {}", tmp.display()))?;
    let mut sink = BufWriter::with_capacity(1 << 20, file);
    match finish(write(&mut sink), sink) {
        Ok(v) => {
            std::fs::rename(&tmp, out)
                .with_context(|| format!("rename {} to {}", tmp.display(), out.display()))?;
            Ok(v)
        }
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// `written`, once `sink` is flushed (a flush error is the answer when the writing went well).
fn finish<T>(written: Result<T>, mut sink: impl Write) -> Result<T> {
    let v = written?;
    sink.flush().context("writing the output")?;
    Ok(v)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::FileTypeExt;

    use super::*;

    #[test]
    fn files_are_renamed_into_place_and_fifos_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.bfd");
        write_file(&out, |w| Ok(w.write_all(b"whole")?)).unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), b"whole");
        // A failure leaves the previous file and no temporary one.
        let failed: Result<()> = write_file(&out, |w| {
            w.write_all(b"half")?;
            anyhow::bail!("stopped")
        });
        assert!(failed.is_err());
        assert_eq!(std::fs::read(&out).unwrap(), b"whole");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        // A FIFO (like /dev/null, not a regular file) is written through and stays a FIFO.
        let fifo = dir.path().join("fifo");
        let c_path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path; mkfifo only creates the node.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(fifo).unwrap())
        };
        write_file(&fifo, |w| Ok(w.write_all(b"through")?)).unwrap();
        assert_eq!(reader.join().unwrap(), b"through");
        assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    }
}
