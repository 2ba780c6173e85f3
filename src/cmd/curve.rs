//! `thrum curve TEST`: open-loop steps at rising rates, each recorded with
//! its achieved rate, response-time percentiles, late and lost
//! transactions and both ends' CPU; then the knee and the saturation point
//! (named by [`crate::curve`]), a table, and with `--out` the record,
//! CSV, chart and HTML page that `thrum report` re-renders.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};

use super::out::{print, target_or_embedded};
use super::progress::Ticker;
use crate::cli::CurveArgs;
use crate::control::client::{self, Observer, Target};
use crate::curve::{self, Curve, CurveSpec, Rates, Step, StepCpu};
use crate::export::{draw, page, write_atomic};
use crate::plan::{Phase, TestPlan};
use crate::result::{Interval, Side, TestResult};

/// The progress line's figure while a step runs.
struct StepProgress<'a> {
    ticker: &'a Ticker,
    label: String,
}

impl Observer for StepProgress<'_> {
    fn on_interval(&mut self, iv: &Interval) {
        self.ticker.set(format!(
            "{} {} {:.0} trans/s",
            self.label,
            iv.phase.name(),
            iv.sum.transactions_per_s.unwrap_or(0.0)
        ));
    }
}

fn cpu(side: &Side) -> StepCpu {
    StepCpu {
        cpu_util_percent: side.cpu_util_percent,
        service_demand_us_per_tran: side.service_demand_us_per_tran,
    }
}

/// A step's record from its run.
pub fn step_of(offered: u64, r: &TestResult) -> Step {
    let s = &r.summary;
    let ol = s.open_loop.as_ref();
    Step {
        index: 0,
        offered_per_s: ol.map_or(offered as f64, |o| o.offered_per_s),
        achieved_per_s: ol
            .map(|o| o.achieved_per_s)
            .or(s.transactions_per_s)
            .unwrap_or(0.0),
        latency_ns: s.latency_ns.clone(),
        service_latency_ns: ol.and_then(|o| o.service_latency_ns.clone()),
        lost: s.lost.unwrap_or(0),
        late: ol.map_or(0, |o| o.late),
        generator_lag_p99_ns: ol.and_then(|o| o.generator_lag_ns).map(|g| g.p99),
        interval_p50_ns: r
            .intervals
            .iter()
            .filter(|i| i.phase == Phase::Measure)
            .filter_map(|i| i.latency_ns.as_ref().map(|l| l.p50))
            .collect(),
        local: cpu(&s.local),
        remote: cpu(&s.remote),
        error: s.error.clone(),
    }
}

/// Runs the steps against one target, drawing the progress line.
struct Runner<'a> {
    target: &'a Target,
    base: &'a TestPlan,
    ticker: Ticker,
}

/// What a run of `p` takes on the clock, for the bar.
fn planned(p: &TestPlan) -> Duration {
    Duration::from_nanos(p.warmup_ns + p.duration_ns + p.cooldown_ns)
}

impl Runner<'_> {
    /// Run one step; None when a stop request (Ctrl-C) cut its measurement
    /// window short: a part of a step is not a step.
    fn step(&self, n: usize, of: &str, rate: u64) -> Option<Step> {
        let mut p = self.base.clone();
        p.offered_per_s = Some(rate);
        self.ticker
            .restart(&format!("{} step {n}/{of}", p.test), Some(planned(&p)));
        let mut obs = StepProgress {
            ticker: &self.ticker,
            label: format!("offered {rate}/s:"),
        };
        let r = client::run(self.target, &p, &mut obs);
        // The window ends at the tick at or after its planned length, so a
        // whole step's is never shorter (the client's own clock).
        let cut =
            crate::control::stop::requested() && r.summary.duration_s * 1e9 < p.duration_ns as f64;
        if cut {
            return None;
        }
        let st = step_of(rate, &r);
        let lat = st
            .latency_ns
            .as_ref()
            .map_or("n/a".into(), |l| crate::units::fmt_ns(l.p99 as f64));
        self.ticker.above(|| {
            eprintln!(
                "step {n}: offered {rate}/s, achieved {:.0}/s, p99 {lat}",
                st.achieved_per_s
            )
        });
        Some(st)
    }

    /// auto: the closed-loop maximum of a short run.
    fn probe(&self, length: Duration) -> Result<f64> {
        let mut p = self.base.clone();
        p.duration_ns = length.as_nanos() as u64;
        p.warmup_ns = p.warmup_ns.min(500_000_000);
        self.ticker
            .restart(&format!("{} closed-loop probe", p.test), Some(planned(&p)));
        let mut obs = StepProgress {
            ticker: &self.ticker,
            label: String::new(),
        };
        let r = client::run(self.target, &p, &mut obs);
        if let Some(e) = &r.summary.error {
            bail!("the closed-loop probe failed: {e}");
        }
        match r.summary.transactions_per_s {
            Some(t) if t >= 1.0 => Ok(t),
            _ => bail!("the closed-loop probe completed no transactions"),
        }
    }
}

/// Two saturated steps in a row: auto's first pass has seen the turn.
fn past_the_turn(steps: &[Step]) -> bool {
    steps.len() >= 2
        && steps[steps.len() - 2..]
            .iter()
            .all(|s| curve::saturated(s).is_some())
}

/// Write results.json, curve.csv, curve.svg and report.html into `dir`.
pub fn write_dir(dir: &Path, c: &Curve) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("--out: creating {}", dir.display()))?;
    let w = |name: &str, bytes: &[u8]| {
        let p = dir.join(name);
        write_atomic(&p, bytes).with_context(|| format!("writing {}", p.display()))
    };
    w("results.json", &serde_json::to_vec_pretty(c)?)?;
    w("curve.csv", crate::export::curve::csv(c).as_bytes())?;
    let svg = draw::curve::svg(c);
    w("curve.svg", svg.as_bytes())?;
    w("report.html", page::curve::report(c, &svg).as_bytes())?;
    Ok(())
}

/// `thrum curve`: the flags become the request, then the steps run.
pub fn curve(args: &CurveArgs) -> Result<ExitCode> {
    let req = args.to_request()?;
    crate::control::stop::on_signals().context("installing signal handlers")?;
    let base = &req.base;
    let (target, _server) = target_or_embedded(req.target.clone(), None)?;
    let runner = Runner {
        target: &target,
        base,
        ticker: Ticker::start(
            std::io::IsTerminal::is_terminal(&std::io::stderr()),
            base.test.name(),
            None,
        ),
    };
    let mut closed_loop = None;
    let mut steps = Vec::new();
    // A failed step (the server went away) or Ctrl-C ends the curve; what
    // was measured is still analysed and written: the steps completed (a
    // failed one among them, with its error), not the one Ctrl-C cut short.
    let go = |steps: &mut Vec<Step>, n: usize, of: &str, rate: u64| {
        if crate::control::stop::requested() {
            return false;
        }
        let Some(st) = runner.step(n, of, rate) else {
            return false;
        };
        let on = st.error.is_none() && !crate::control::stop::requested();
        steps.push(st);
        on
    };
    match &req.rates {
        Rates::List(v) => {
            let of = v.len().to_string();
            for (i, &r) in v.iter().enumerate() {
                if !go(&mut steps, i + 1, &of, r) {
                    break;
                }
            }
        }
        Rates::Auto => 'auto: {
            let max = runner.probe(req.probe)?;
            runner
                .ticker
                .above(|| eprintln!("closed-loop probe: {max:.0} trans/s"));
            closed_loop = Some(max);
            let first = curve::auto_rates(max);
            let of = format!("{}+", first.len());
            for (i, &r) in first.iter().enumerate() {
                if !go(&mut steps, i + 1, &of, r) {
                    break 'auto;
                }
                if past_the_turn(&steps) {
                    break;
                }
            }
            for k in 1..=curve::AUTO_BEYOND {
                if curve::saturation(&steps).is_some() {
                    break;
                }
                let n = steps.len() + 1;
                if !go(&mut steps, n, "beyond", curve::beyond(&first, k)) {
                    break 'auto;
                }
            }
            for r in curve::refine_rates(&steps, req.slo.as_ref()) {
                let n = steps.len() + 1;
                if !go(&mut steps, n, "refine", r) {
                    break 'auto;
                }
            }
        }
    }
    drop(runner);
    let mut c = Curve {
        schema: curve::SCHEMA.into(),
        test: base.test.name().into(),
        server: target.label.clone(),
        spec: CurveSpec {
            rates: match &req.rates {
                Rates::Auto => "auto".into(),
                Rates::List(v) => v.iter().map(u64::to_string).collect::<Vec<_>>().join(","),
            },
            step_s: base.duration_ns as f64 / 1e9,
            warmup_s: base.warmup_ns as f64 / 1e9,
            interval_s: base.interval_ns as f64 / 1e9,
            flows: base.flows,
            threads: base.threads,
            request_bytes: base.request_bytes,
            response_bytes: base.response_bytes,
            arrivals: crate::cli::arrivals_name(base.arrivals).into(),
            max_inflight: base.max_inflight,
            slo: req.slo,
            closed_loop_per_s: closed_loop,
        },
        steps,
        knee: None,
        saturation: None,
        interrupted: crate::control::stop::requested(),
    };
    curve::analyse(&mut c);
    say(&c, req.json, req.out.as_deref())?;
    let doc = serde_json::to_value(&c).context("the curve as JSON")?;
    let target_name = super::save::target_name(&target);
    super::save::save(&req.store, "curve", base.test.name(), &target_name, &doc);
    if crate::control::stop::requested() {
        eprintln!("error: {}", crate::control::stop::INTERRUPTED);
        return Ok(ExitCode::from(crate::control::stop::EXIT_INTERRUPTED));
    }
    Ok(verdict(&c))
}

/// Print the table (or with `json` the record), write `dir` when given,
/// and say where it is on stderr: a note, not a result.
pub fn say(c: &Curve, json: bool, dir: Option<&Path>) -> Result<()> {
    if json {
        print(&format!("{}\n", serde_json::to_string_pretty(c)?))?;
    } else {
        print(&crate::export::curve::table(c))?;
    }
    if let Some(d) = dir {
        write_dir(d, c)?;
        eprintln!("results in {}", d.display());
    }
    Ok(())
}

/// A curve whose step failed fails, as the run did.
pub fn verdict(c: &Curve) -> ExitCode {
    if c.failed() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
