//! The one progress line on stderr: drawn in place (`\r`, erase the line)
//! while a command runs, and only when stderr is a terminal, so a log or a
//! pipe never receives control codes. `run`'s live figure, the aggregate's
//! ramp bar and the suite's and sweep's "running ..." lines all draw here.

use std::io::{IsTerminal, Write};

/// A line on stderr that each [`draw`](StatusLine::draw) replaces; erased
/// when dropped, so the result printed after it starts on a clean line.
pub struct StatusLine {
    on: bool,
}

impl StatusLine {
    /// A line that draws only when stderr is a terminal.
    pub fn stderr() -> StatusLine {
        StatusLine::with(std::io::stderr().is_terminal())
    }

    /// A line that draws when `on`; off, every call does nothing.
    pub fn with(on: bool) -> StatusLine {
        StatusLine { on }
    }

    /// Whether this line writes at all.
    pub fn on(&self) -> bool {
        self.on
    }

    /// Replace the line with `text`.
    pub fn draw(&self, text: &str) {
        if self.on {
            draw_line(text);
        }
    }

    /// Write `text` as a line of its own that stays, above the progress line.
    pub fn keep(&self, text: &str) {
        if self.on {
            let _ = writeln!(std::io::stderr().lock(), "\r\x1b[2K{text}");
        }
    }

    /// Erase the line.
    pub fn clear(&self) {
        if self.on {
            clear_line();
        }
    }
}

impl Drop for StatusLine {
    fn drop(&mut self) {
        self.clear();
    }
}

/// Replace the progress line on stderr with `text` (callers check that
/// stderr is a terminal: [`StatusLine`], or `cmd::progress`'s ticker).
pub fn draw_line(text: &str) {
    let mut e = std::io::stderr().lock();
    let _ = write!(e, "\r\x1b[2K{text}");
    let _ = e.flush();
}

/// Erase the progress line on stderr.
pub fn clear_line() {
    let mut e = std::io::stderr().lock();
    let _ = write!(e, "\r\x1b[2K");
    let _ = e.flush();
}
