//! A one-line progress bar for the ramp on stderr: step i of n, elapsed
//! and total time, streams running, the current aggregate. Drawn on the one
//! progress line ([`StatusLine`]), so silent when stderr is not a terminal.

use std::time::{Duration, Instant};

use crate::term::StatusLine;

pub struct RampProgress {
    status: StatusLine,
    test: &'static str,
    unit: &'static str,
    steps: usize,
    step: usize,
    running: u32,
    /// The latest interim figure of each stream.
    latest: Vec<f64>,
    drawn: Option<Instant>,
    /// When the ramp began, and how long it is planned to last.
    began: Instant,
    total: Duration,
}

impl RampProgress {
    /// A bar that draws only when stderr is a terminal.
    pub fn new() -> RampProgress {
        RampProgress::with(StatusLine::stderr())
    }

    pub fn with(line: StatusLine) -> RampProgress {
        RampProgress {
            status: line,
            test: "",
            unit: "",
            steps: 0,
            step: 0,
            running: 0,
            latest: Vec::new(),
            drawn: None,
            began: Instant::now(),
            total: Duration::ZERO,
        }
    }

    /// A ramp of `steps` steps of `step` each begins.
    pub fn begin(&mut self, test: &'static str, unit: &'static str, steps: usize, step: Duration) {
        (self.test, self.unit, self.steps) = (test, unit, steps);
        self.began = Instant::now();
        self.total = step * steps as u32;
        self.latest.clear();
        self.draw(true);
    }

    pub fn step(&mut self, i: usize, running: u32) {
        (self.step, self.running) = (i, running);
        self.draw(true);
    }

    pub fn update(&mut self, stream: u32, value: f64) {
        let k = stream as usize;
        if self.latest.len() <= k {
            self.latest.resize(k + 1, 0.0);
        }
        self.latest[k] = value;
        self.draw(false);
    }

    /// Redraw with the clock moved on (at most five times a second).
    pub fn tick(&mut self) {
        self.draw(false);
    }

    /// The bar as text (without the terminal control codes).
    pub fn line(&self) -> String {
        self.line_at(self.began.elapsed())
    }

    fn line_at(&self, elapsed: Duration) -> String {
        const WIDTH: usize = 20;
        let filled = ((self.step + 1) * WIDTH)
            .checked_div(self.steps)
            .unwrap_or(0)
            .min(WIDTH);
        format!(
            "{:<8} [{}{}] step {}/{}  {:.0}s / {:.0}s  {} stream(s)  {:.1} {}",
            self.test,
            "#".repeat(filled),
            "-".repeat(WIDTH - filled),
            self.step + 1,
            self.steps,
            elapsed.as_secs_f64(),
            self.total.as_secs_f64(),
            self.running,
            // fold from +0.0: an empty f64 sum is -0.0.
            self.latest.iter().fold(0.0, |a, v| a + v),
            self.unit
        )
    }

    fn draw(&mut self, force: bool) {
        if !self.status.on() {
            return;
        }
        let now = Instant::now();
        if !force
            && self
                .drawn
                .is_some_and(|d| now - d < Duration::from_millis(200))
        {
            return;
        }
        self.drawn = Some(now);
        self.status.draw(&self.line());
    }

    pub fn end(&mut self) {
        self.status.clear();
    }
}

impl Default for RampProgress {
    fn default() -> Self {
        RampProgress::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_shows_step_streams_and_aggregate() {
        let mut p = RampProgress::with(StatusLine::with(false));
        p.begin("tps", "Trans/s", 3, Duration::from_secs(60));
        assert!(p.line().ends_with(" 0.0 Trans/s"), "{}", p.line());
        p.step(1, 2);
        p.update(0, 100.0);
        p.update(1, 50.0);
        p.update(0, 110.0);
        assert_eq!(
            p.line_at(Duration::from_secs(75)),
            "tps      [#############-------] step 2/3  75s / 180s  2 stream(s)  160.0 Trans/s"
        );
    }
}
