//! Pre-shared-key authentication: HMAC-SHA256 challenge-response.
//!
//! A server started with `--psk-file` puts a fresh random nonce (32 bytes
//! from the OS, getrandom) in its hello. The client answers with
//! `HMAC-SHA256(key, "thrum-auth-v1" || nonce)` in an `auth` message; the
//! server computes the same and compares in constant time (subtle), so the
//! comparison's duration says nothing about how many bytes matched. The key
//! never crosses the wire, a captured answer is useless against the next
//! nonce, and [`Psk`] prints as `<redacted>` so that no log line, error or
//! result can carry it.
//!
//! This proves the client holds the key; it neither encrypts nor
//! authenticates the later messages (see docs/server.md for what that means).

use std::fmt;
use std::path::Path;

use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;
use thiserror::Error;

/// Bytes of the server's challenge.
pub const NONCE_LEN: usize = 32;
/// Bytes of an HMAC-SHA256 answer.
pub const MAC_LEN: usize = 32;
/// The shortest key accepted: 16 bytes (128 bits).
pub const MIN_KEY_BYTES: usize = 16;
/// The longest key file read (a key, not a document).
pub const MAX_KEY_BYTES: usize = 4096;

/// Separates thrum's MACs from any other use of the same key.
const CONTEXT: &[u8] = b"thrum-auth-v1";

#[derive(Debug, Error)]
pub enum AuthError {
    #[error("--psk-file {path}: {why}")]
    KeyFile { path: String, why: String },
    #[error("no randomness for the authentication nonce: {0}")]
    Random(String),
}

/// A pre-shared key. Its `Debug` never shows the bytes.
#[derive(Clone)]
pub struct Psk(Vec<u8>);

impl fmt::Debug for Psk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Psk(<redacted>)")
    }
}

impl Psk {
    /// Read a key file: its bytes with trailing whitespace (the newline an
    /// editor adds) removed; 16..=4096 bytes must remain.
    pub fn from_file(path: &Path) -> Result<Psk, AuthError> {
        let err = |why: String| AuthError::KeyFile {
            path: path.display().to_string(),
            why,
        };
        let meta = std::fs::metadata(path).map_err(|e| err(e.to_string()))?;
        if !meta.is_file() {
            return Err(err("not a regular file".into()));
        }
        if meta.len() > crate::nofollow::KEY_FILE.max_bytes {
            return Err(err(format!(
                "{} bytes is too long for a key (accepted: {MIN_KEY_BYTES}..={MAX_KEY_BYTES} bytes)",
                meta.len()
            )));
        }
        // Bounded again as it is read: the file may have grown since.
        let bytes = crate::nofollow::read_bounded(path, &crate::nofollow::KEY_FILE)
            .map_err(|e| err(e.to_string()))?;
        Psk::from_bytes(bytes).map_err(err)
    }

    /// A key from bytes already in memory (trailing whitespace removed).
    pub fn from_bytes(mut bytes: Vec<u8>) -> Result<Psk, String> {
        while bytes.last().is_some_and(|b| b.is_ascii_whitespace()) {
            bytes.pop();
        }
        if !(MIN_KEY_BYTES..=MAX_KEY_BYTES).contains(&bytes.len()) {
            return Err(format!(
                "a key of {} bytes (accepted: {MIN_KEY_BYTES}..={MAX_KEY_BYTES} bytes; try `head -c 32 /dev/urandom | base64 > FILE`)",
                bytes.len()
            ));
        }
        Ok(Psk(bytes))
    }

    /// The answer to `nonce`.
    pub fn answer(&self, nonce: &[u8]) -> [u8; MAC_LEN] {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes keys of any length");
        mac.update(CONTEXT);
        mac.update(nonce);
        mac.finalize().into_bytes().into()
    }

    /// Whether `answer` proves the key for `nonce`, compared in constant time.
    pub fn verify(&self, nonce: &[u8], answer: &[u8]) -> bool {
        let want = self.answer(nonce);
        answer.len() == MAC_LEN && bool::from(want.ct_eq(answer))
    }
}

/// A fresh challenge.
pub fn nonce() -> Result<[u8; NONCE_LEN], AuthError> {
    let mut n = [0u8; NONCE_LEN];
    getrandom::fill(&mut n).map_err(|e| AuthError::Random(e.to_string()))?;
    Ok(n)
}

/// Lower-case hex, as nonces and answers travel in the JSON messages.
pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Parse hex of exactly `N` bytes; None for anything else.
pub fn from_hex<const N: usize>(s: &str) -> Option<[u8; N]> {
    if s.len() != 2 * N || !s.is_ascii() {
        return None;
    }
    let mut out = [0u8; N];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(s: &str) -> Psk {
        Psk::from_bytes(s.as_bytes().to_vec()).unwrap()
    }

    #[test]
    fn right_key_verifies_wrong_key_does_not() {
        let n = nonce().unwrap();
        let k = key("0123456789abcdef0123");
        assert!(k.verify(&n, &k.answer(&n)));
        assert!(!key("0123456789abcdef0124").verify(&n, &k.answer(&n)));
        // A replayed answer does not fit another nonce.
        let n2 = nonce().unwrap();
        assert!(!k.verify(&n2, &k.answer(&n)));
        assert!(!k.verify(&n, &k.answer(&n)[..31]));
    }

    #[test]
    fn rfc4231_case_2() {
        // HMAC-SHA256 itself, with thrum's context prefix moved into the data:
        // key "Jefe", data "what do ya want for nothing?" (RFC 4231, 4.3).
        let mut mac = Hmac::<Sha256>::new_from_slice(b"Jefe").unwrap();
        mac.update(b"what do ya want for nothing?");
        assert_eq!(
            to_hex(&mac.finalize().into_bytes()),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn key_files_are_checked_and_never_printed() {
        assert!(Psk::from_bytes(b"short\n".to_vec()).is_err());
        let k = key("a-secret-of-enough-length\n");
        assert!(!format!("{k:?}").contains("secret"));
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("k");
        std::fs::write(&p, "a-secret-of-enough-length\n").unwrap();
        let from_file = Psk::from_file(&p).unwrap();
        let n = [7u8; NONCE_LEN];
        assert_eq!(from_file.answer(&n), k.answer(&n));
        let e = Psk::from_file(&dir.path().join("missing")).unwrap_err();
        assert!(e.to_string().contains("--psk-file"), "{e}");
    }

    #[test]
    fn hex_round_trip() {
        let n = [0xabu8, 0x01, 0xff];
        assert_eq!(from_hex::<3>(&to_hex(&n)), Some(n));
        assert_eq!(from_hex::<3>("abc"), None);
        assert_eq!(from_hex::<2>("zz00"), None);
        assert_eq!(from_hex::<2>("é0"), None);
    }
}
