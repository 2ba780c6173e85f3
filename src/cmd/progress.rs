//! The progress line on stderr while a command runs on a terminal: what
//! runs, a bar with elapsed and total time, and the latest figure, redrawn
//! five times a second by a thread of its own (the session reports only
//! once per interval). Rows printed on stdout go through [`Ticker::above`],
//! which clears the line first, so the two never mix on one terminal.

use std::io::Write;

use crate::term::{clear_line as clear, draw_line};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const REDRAW: Duration = Duration::from_millis(200);
const WIDTH: usize = 20;

struct State {
    label: String,
    start: Instant,
    total: Option<Duration>,
    detail: String,
}

impl State {
    fn line(&self) -> String {
        line(&self.label, self.start.elapsed(), self.total, &self.detail)
    }
}

/// `label [#####---] 3.2s / 11.0s  detail` (no bar without a total).
pub fn line(label: &str, elapsed: Duration, total: Option<Duration>, detail: &str) -> String {
    let e = elapsed.as_secs_f64();
    match total.filter(|t| !t.is_zero()) {
        Some(t) => {
            let t = t.as_secs_f64();
            let filled = ((e / t * WIDTH as f64) as usize).min(WIDTH);
            format!(
                "{label} [{}{}] {e:.1}s / {t:.1}s  {detail}",
                "#".repeat(filled),
                "-".repeat(WIDTH - filled)
            )
        }
        None => format!("{label} {e:.1}s  {detail}"),
    }
}

/// The line and its redraw thread; silent when not on a terminal.
pub struct Ticker {
    state: Option<Arc<Mutex<State>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// Draw on the one progress line (the ticker runs only on a terminal).
fn draw(s: &State) {
    draw_line(&s.line());
}

impl Ticker {
    /// Start drawing when `on` (stderr is a terminal); `total` is the
    /// planned length, None when unknown (a count-limited run).
    pub fn start(on: bool, label: &str, total: Option<Duration>) -> Ticker {
        let stop = Arc::new(AtomicBool::new(false));
        if !on {
            return Ticker {
                state: None,
                stop,
                thread: None,
            };
        }
        let state = Arc::new(Mutex::new(State {
            label: label.to_string(),
            start: Instant::now(),
            total,
            detail: String::new(),
        }));
        let (st, sp) = (state.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("thrum-progress".into())
            .spawn(move || {
                while !sp.load(Ordering::Relaxed) {
                    if let Ok(s) = st.lock() {
                        draw(&s);
                    }
                    std::thread::sleep(REDRAW);
                }
            })
            .ok();
        Ticker {
            state: Some(state),
            stop,
            thread,
        }
    }

    /// The figure and phase after the bar.
    pub fn set(&self, detail: String) {
        if let Some(Ok(mut s)) = self.state.as_ref().map(|s| s.lock()) {
            s.detail = detail;
        }
    }

    /// A new label and total, the clock restarted (the next cell of a sweep).
    pub fn restart(&self, label: &str, total: Option<Duration>) {
        if let Some(Ok(mut s)) = self.state.as_ref().map(|s| s.lock()) {
            s.label = label.to_string();
            s.total = total;
            s.start = Instant::now();
            s.detail.clear();
        }
    }

    /// Run `f` (which prints to stdout or stderr) with the line cleared,
    /// then draw the line again below what it printed.
    pub fn above(&self, f: impl FnOnce()) {
        match self.state.as_ref().map(|s| s.lock()) {
            Some(Ok(s)) => {
                clear();
                f();
                let _ = std::io::stdout().flush();
                draw(&s);
            }
            _ => f(),
        }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
            clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_shows_elapsed_of_total() {
        let l = line(
            "tcp_rr",
            Duration::from_millis(5500),
            Some(Duration::from_secs(11)),
            "measure 1.2 k trans/s",
        );
        assert_eq!(
            l,
            "tcp_rr [##########----------] 5.5s / 11.0s  measure 1.2 k trans/s"
        );
        assert_eq!(
            line("tcp_rr", Duration::from_secs(2), None, "x"),
            "tcp_rr 2.0s  x"
        );
        // Past the plan (the drain): a full bar, the real time.
        assert!(
            line(
                "t",
                Duration::from_secs(12),
                Some(Duration::from_secs(11)),
                ""
            )
            .starts_with("t [####################] 12.0s / 11.0s")
        );
    }
}
