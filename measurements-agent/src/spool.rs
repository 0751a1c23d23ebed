//! The local spool: every run is written here, durably, before any upload is tried, and
//! leaves only once the server has acknowledged it.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use model::RunUpload;

/// A directory of runs waiting for upload, one `<run_id>.json` each.
pub struct Spool {
    dir: PathBuf,
}

impl Spool {
    /// Opens (creating) the spool at `dir`.
    pub fn open(dir: &Path) -> anyhow::Result<Self> {
        fs::create_dir_all(dir.join("rejected")).with_context(|| format!("cannot create spool {}", dir.display()))?;
        Ok(Spool { dir: dir.to_path_buf() })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Writes a run atomically and durably: temp file, fsync, rename, fsync of the directory.
    /// On failure (a full disk, say) the temp file is removed and nothing else is touched.
    pub fn put(&self, run: &RunUpload) -> anyhow::Result<PathBuf> {
        let path = self.dir.join(format!("{}.json", run.run_id));
        let temp = self.dir.join(format!(".{}.json.tmp", run.run_id));
        let written = (|| -> std::io::Result<()> {
            let mut file = File::create(&temp)?;
            serde_json::to_writer_pretty(&mut file, run).map_err(std::io::Error::from)?;
            file.write_all(b"\n")?;
            file.sync_all()?;
            fs::rename(&temp, &path)?;
            File::open(&self.dir)?.sync_all()
        })();
        if let Err(err) = written {
            let _ = fs::remove_file(&temp);
            use std::io::ErrorKind::{FileTooLarge, QuotaExceeded, StorageFull};
            let full = matches!(err.kind(), StorageFull | FileTooLarge | QuotaExceeded);
            return Err(anyhow::Error::new(err)).with_context(|| {
                format!(
                    "cannot spool run {} in {}{}",
                    run.run_id,
                    self.dir.display(),
                    if full { ": the disk is full" } else { "" }
                )
            });
        }
        Ok(path)
    }

    /// Runs waiting for upload, oldest first.
    pub fn pending(&self) -> anyhow::Result<Vec<PathBuf>> {
        let mut entries: Vec<(std::time::SystemTime, PathBuf)> = fs::read_dir(&self.dir)?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .filter(|p| !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.')))
            .map(|p| (fs::metadata(&p).and_then(|m| m.modified()).unwrap_or(std::time::UNIX_EPOCH), p))
            .collect();
        entries.sort();
        Ok(entries.into_iter().map(|(_, p)| p).collect())
    }

    pub fn load(path: &Path) -> anyhow::Result<RunUpload> {
        let text = fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        serde_json::from_str(&text).with_context(|| format!("{} is not a run", path.display()))
    }

    /// Forgets an acknowledged run.
    pub fn remove(&self, path: &Path) -> anyhow::Result<()> {
        fs::remove_file(path).with_context(|| format!("cannot remove {}", path.display()))
    }

    /// Moves a run the server refused for good to `rejected/`, with the reason beside it.
    pub fn reject(&self, path: &Path, reason: &str) -> anyhow::Result<PathBuf> {
        let name = path.file_name().context("spool entry without a name")?;
        let target = self.dir.join("rejected").join(name);
        fs::rename(path, &target)?;
        fs::write(target.with_extension("reason.txt"), format!("{reason}\n"))?;
        Ok(target)
    }
}
