//! The page of one saved test that is not a mix (`thrum report` of a
//! `run --json`): the summary as the terminal shows it, the chart when the
//! test has one, the intervals and the warnings.

use std::fmt::Write;

use super::{head, inline, opt, phase_of, warnings};
use crate::export::human::Human;
use crate::result::TestResult;
use crate::text::escape_markup as escape;
use crate::units::fmt_ns;

/// The page of one test that is not a mix (`thrum report` of a saved `run
/// --json`): the summary as the terminal shows it, the chart when the test
/// has one (capacity's histogram), every interval's figure of merit and
/// latency, and the warnings. A mix has its own page, [`super::mix`].
pub fn report(r: &TestResult, chart: Option<&str>) -> String {
    let title = format!("thrum {} to {}", r.test.name(), escape(&r.spec.server));
    let mut o = head(&title);
    let human = crate::export::render(&Human::default(), r);
    let _ = writeln!(o, "<pre>{}</pre>", escape(&String::from_utf8_lossy(&human)));
    if let Some(svg) = chart {
        o.push_str(inline(svg));
        o.push('\n');
    }
    let (_, unit) = r.headline();
    let _ = writeln!(
        o,
        "<h2>Intervals</h2>\n<table class=\"intervals\">\n<tr><th>interval</th><th>phase</th><th>from (s)</th><th>to (s)</th><th>{unit}</th><th>p50</th><th>p99</th></tr>"
    );
    for iv in &r.intervals {
        let lat = |f: fn(&crate::stats::latency::LatencySummary) -> u64| {
            iv.latency_ns
                .as_ref()
                .map_or("-".into(), |l| fmt_ns(f(l) as f64))
        };
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{:.2}</td><td>{:.2}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            iv.index,
            phase_of(iv),
            iv.start_s,
            iv.end_s,
            opt(iv.headline()),
            lat(|l| l.p50),
            lat(|l| l.p99)
        );
    }
    o.push_str("</table>\n");
    warnings(&mut o, &r.summary.warnings);
    o.push_str("</body></html>\n");
    o
}
