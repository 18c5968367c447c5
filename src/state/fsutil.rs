//! Small file-system helpers shared by the data directory and the replay
//! tools.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Writes `bytes` to `path` atomically: a temporary file beside it, fsynced,
/// renamed over `path`, and the directory fsynced. A reader sees the old
/// contents or the new, never a mix. Errors name the file that failed.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), (PathBuf, std::io::Error)> {
    let tmp = path.with_extension("tmp");
    let at = |p: &Path| {
        let p = p.to_path_buf();
        move |e| (p, e)
    };
    let mut f = fs::File::create(&tmp).map_err(at(&tmp))?;
    f.write_all(bytes).map_err(at(&tmp))?;
    f.sync_all().map_err(at(&tmp))?;
    fs::rename(&tmp, path).map_err(at(path))?;
    sync_dir(path.parent().unwrap_or(Path::new("."))).map_err(at(path))
}

/// fsyncs a directory, so renames and new entries in it survive a crash.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    fs::File::open(dir)?.sync_all()
}

/// Copies the tree `from` into `to` (which must not exist), hard-linking
/// RocksDB's immutable table files (`*.sst`, `*.blob`) and copying
/// everything else, which the opener may change. Returns the bytes copied
/// or linked.
pub fn copy_tree_linking_tables(from: &Path, to: &Path) -> std::io::Result<u64> {
    fs::create_dir(to)?;
    let mut bytes = 0;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type()?;
        if kind.is_dir() {
            bytes += copy_tree_linking_tables(&src, &dst)?;
            continue;
        }
        let immutable = matches!(
            src.extension().and_then(|e| e.to_str()),
            Some("sst" | "blob")
        );
        if !(immutable && fs::hard_link(&src, &dst).is_ok()) {
            fs::copy(&src, &dst)?;
        }
        bytes += entry.metadata()?.len();
    }
    sync_dir(to)?;
    Ok(bytes)
}

/// Bytes under `path` (files only; a missing path is 0).
pub fn tree_size(path: &Path) -> u64 {
    let Ok(meta) = fs::symlink_metadata(path) else {
        return 0;
    };
    if !meta.is_dir() {
        return meta.len();
    }
    fs::read_dir(path)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| tree_size(&e.path())).sum())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves a copied tree has the same files and contents, and that table files are links, not copies.
    #[test]
    fn copy_links_tables_and_copies_the_rest() {
        let tmp = tempfile::tempdir().unwrap();
        let a = tmp.path().join("a");
        fs::create_dir_all(a.join("sub")).unwrap();
        fs::write(a.join("000007.sst"), b"table").unwrap();
        fs::write(a.join("MANIFEST-000005"), b"manifest").unwrap();
        fs::write(a.join("sub/x.log"), b"wal").unwrap();
        let b = tmp.path().join("b");
        assert_eq!(copy_tree_linking_tables(&a, &b).unwrap(), 5 + 8 + 3);
        assert_eq!(fs::read(b.join("sub/x.log")).unwrap(), b"wal");
        // Appending to the copied manifest leaves the original alone.
        fs::OpenOptions::new()
            .append(true)
            .open(b.join("MANIFEST-000005"))
            .unwrap()
            .write_all(b"!")
            .unwrap();
        assert_eq!(fs::read(a.join("MANIFEST-000005")).unwrap(), b"manifest");
        use std::os::unix::fs::MetadataExt;
        assert_eq!(
            fs::metadata(a.join("000007.sst")).unwrap().ino(),
            fs::metadata(b.join("000007.sst")).unwrap().ino()
        );
        assert_eq!(tree_size(&b), 17);
        assert!(copy_tree_linking_tables(&a, &b).is_err(), "target exists");
    }
}
