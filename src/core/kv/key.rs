//! The key of a staged write, held inline when short.

/// Bytes a [`Key`] holds without a heap allocation: every key of the
/// views (two to four ids) fits.
pub const KEY_INLINE: usize = 32;

/// A staged write's key: short keys are held inline, so the batch's ordered
/// overlay compares them without following a pointer per comparison.
#[derive(Clone)]
pub enum Key {
    /// Up to [`KEY_INLINE`] bytes: the first `len` of `buf`.
    Inline {
        /// Bytes used.
        len: u8,
        /// The bytes, zero-padded.
        buf: [u8; KEY_INLINE],
    },
    /// A longer key.
    Heap(Box<[u8]>),
}

impl Key {
    /// The key's bytes.
    pub fn as_slice(&self) -> &[u8] {
        match self {
            Key::Inline { len, buf } => &buf[..*len as usize],
            Key::Heap(b) => b,
        }
    }
}

impl From<&[u8]> for Key {
    fn from(b: &[u8]) -> Key {
        if b.len() <= KEY_INLINE {
            let mut buf = [0; KEY_INLINE];
            buf[..b.len()].copy_from_slice(b);
            Key::Inline {
                len: b.len() as u8,
                buf,
            }
        } else {
            Key::Heap(b.into())
        }
    }
}

impl std::ops::Deref for Key {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsRef<[u8]> for Key {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl std::borrow::Borrow<[u8]> for Key {
    fn borrow(&self) -> &[u8] {
        self.as_slice()
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for Key {}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Key) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Key {
    fn cmp(&self, other: &Key) -> std::cmp::Ordering {
        self.as_slice().cmp(other.as_slice())
    }
}

impl std::hash::Hash for Key {
    /// As the bytes hash, so a map keyed by `Key` is searched by `&[u8]`.
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state);
    }
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:02x?}", self.as_slice())
    }
}
