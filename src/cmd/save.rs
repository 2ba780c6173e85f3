//! Saving a result in the results store ([`crate::store`]) at the end of
//! a measuring command. The store never costs the run: whatever goes
//! wrong (no home, a locked, full, corrupt or unwritable file) is one
//! warning on stderr naming the store and its problem, after the result
//! has been printed and written.

use std::io::IsTerminal;

use crate::cli::StoreRequest;
use crate::store::{Record, Store};

/// Save `doc` (the document `--json` prints) as a run of `command`; its
/// id, or None when not saved (`--no-save`, or the warning said why).
pub fn save(
    req: &StoreRequest,
    command: &str,
    test: &str,
    target: &str,
    doc: &serde_json::Value,
) -> Option<String> {
    if !req.save {
        return None;
    }
    let path = match &req.path {
        Ok(p) => p,
        Err(e) => {
            eprintln!("warning: {e}: the run is not saved");
            return None;
        }
    };
    let rec = Record {
        command,
        test: test.to_string(),
        target: target.to_string(),
        name: req.name.clone(),
        labels: req.labels.clone(),
        doc,
    };
    match Store::open(path).and_then(|s| s.save(&rec)) {
        Ok(id) => {
            if std::io::stderr().is_terminal() {
                eprintln!("saved as {id} in {}", path.display());
            }
            Some(id)
        }
        Err(e) => {
            eprintln!("warning: {e}; the run is not saved (--no-save skips the store)");
            None
        }
    }
}

/// The target as the store keeps it: the server as given, or `embedded`.
pub fn target_name(target: &crate::control::client::Target) -> String {
    if target.embedded {
        "embedded".into()
    } else {
        target.label.clone()
    }
}
