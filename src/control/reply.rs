//! The one way the client ends read a server's reply: within the reply
//! timeout, a refusal or a reply of the wrong kind turned into an error
//! that names the server and what was awaited. Apart from `client` so
//! that the clock exchange (`clocks`), which the client's session also
//! calls, reads its pongs the same way without importing the session.

use std::net::TcpStream;

use anyhow::{Context, Result, anyhow, bail};

use super::deadline::read_msg_within;
use super::proto::{FrameError, MAX_FRAME, Message, ServerMsg};
use super::timeline::REPLY_TIMEOUT;
use crate::text;

/// Read the server's reply of type `T` within [`REPLY_TIMEOUT`]; its error
/// message, another message, silence or a broken frame is an error that
/// names the server and what was awaited.
pub fn expect<T: Message<ServerMsg>>(ctrl: &mut TcpStream, server: &str) -> Result<T> {
    let want = T::KIND;
    // The whole reply within the timeout: a server trickling bytes cannot hold us.
    match read_msg_within::<ServerMsg>(ctrl, MAX_FRAME, REPLY_TIMEOUT) {
        Ok(ServerMsg::Error(e)) => {
            bail!("server {server} refused: {}", text::message(&e.message))
        }
        Ok(m) => T::take(m).map_err(|m| {
            anyhow!(
                "server {server} sent '{}' where '{want}' was expected",
                m.kind()
            )
        }),
        Err(FrameError::Timeout) => {
            bail!("server {server} did not answer within {REPLY_TIMEOUT:?} (waiting for '{want}')")
        }
        // No thrum server sends a frame over the limit: its first bytes
        // were another protocol's answer.
        Err(FrameError::TooLarge(len, _)) => {
            let head = u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes();
            let rest = super::foreign::rest_of_line(ctrl);
            bail!(
                "{server} is not a thrum server ({})",
                super::foreign::describe(head, &rest)
            )
        }
        Err(e) => Err(anyhow!(e)).with_context(|| format!("waiting for '{want}' from {server}")),
    }
}
