//! `thrum web`'s flags, checked into a plain [`WebRequest`]: the store
//! to serve, the address (loopback unless a token guards it), the token
//! read from its file.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;

use anyhow::{Result, anyhow, bail};
use clap::Args;

use crate::web::auth::{self, Token};

/// `thrum web`.
#[derive(Debug, Args)]
pub struct WebArgs {
    /// The results store to serve, read-only (default: $THRUM_DB, else $XDG_DATA_HOME/thrum/results.db, else ~/.local/share/thrum/results.db).
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Listen on ADDR (HOST:PORT). An address other than loopback needs --token-file: whoever reaches the pages reads every stored result.
    #[arg(long, value_name = "ADDR", default_value = crate::web::DEFAULT_LISTEN)]
    pub listen: String,
    /// Serve only requests that carry the token in FILE: `Authorization: Bearer TOKEN`, or the cookie a browser gets by opening any page once with ?token=TOKEN.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
}

/// `thrum web`, checked.
#[derive(Debug)]
pub struct WebRequest {
    pub db: PathBuf,
    pub listen: SocketAddr,
    pub token: Option<Token>,
    /// What is unsafe about the token file, said at start-up.
    pub warnings: Vec<String>,
}

impl WebArgs {
    pub fn to_request(&self) -> Result<WebRequest> {
        let db = match &self.db {
            Some(p) if !p.as_os_str().is_empty() => p.clone(),
            _ => crate::store::default_path().map_err(anyhow::Error::msg)?,
        };
        let listen = self
            .listen
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .ok_or_else(|| {
                anyhow!(
                    "--listen {:?} is not an address (accepted: HOST:PORT such as {} or [::1]:12882)",
                    crate::text::echo(&self.listen),
                    crate::web::DEFAULT_LISTEN
                )
            })?;
        let token = match &self.token_file {
            Some(p) => Some(Token::from_file(p).map_err(anyhow::Error::msg)?),
            None => None,
        };
        if token.is_none() && !listen.ip().is_loopback() {
            bail!(
                "--listen {listen} is not a loopback address: whoever reaches it reads every stored result \
(targets, labels, command lines, hosts), so it needs --token-file FILE (a token of {} to {} printable \
characters; every request then carries it, see docs/web.md)",
                auth::MIN_TOKEN,
                auth::MAX_TOKEN
            );
        }
        Ok(WebRequest {
            db,
            listen,
            warnings: self
                .token_file
                .as_deref()
                .map(auth::file_warnings)
                .unwrap_or_default(),
            token,
        })
    }
}
