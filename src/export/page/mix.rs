//! The page of a mix (`--html`, `thrum report` of a saved mix): the
//! grades, the parts, the phases, the mix's chart and its probes' latency
//! CDF, and the intervals.

use std::fmt::Write as _;

use super::{head, inline, phase_of, warnings};
use crate::export::draw::mix::{cdf_svg, series, svg};
use crate::export::mix::{jain_text, ms, part_figure, phase_rows, signed_ms};
use crate::result::TestResult;
use crate::text::escape_markup as escape;
use crate::units::BitsPerSec;

/// `--html`: one self-contained page for a mix (no scripts, no external
/// files): the grades, the parts, the phases, the chart and the probes'
/// latency CDF idle and loaded inlined, and the intervals with each
/// direction's goodput, the probes' median, the fairness and the
/// retransmissions.
pub fn report(r: &TestResult) -> String {
    let s = &r.summary;
    let title = format!("thrum latency under load: {}", escape(&r.spec.server));
    let mut o = head(&title);
    let _ = writeln!(
        o,
        "<p>{} part(s), {} flow(s), {:.2} s measured.</p>",
        s.parts.len(),
        r.spec.plan.flows,
        s.duration_s
    );
    if let Some(e) = &s.error {
        let _ = writeln!(o, "<p class=\"warnings\">error: {}</p>", escape(e));
    }
    o.push_str("<h2>Grades</h2>\n<table>\n");
    if let Some(l) = &s.latency_under_load_ns {
        let _ = writeln!(
            o,
            "<tr><th>latency under load</th><td>p50 {}</td><td>p99 {}</td></tr>",
            signed_ms(l.p50),
            signed_ms(l.p99)
        );
    }
    if let Some(f) = &s.fairness {
        let _ = writeln!(
            o,
            "<tr><th>fairness (Jain)</th><td>up {}</td><td>down {}</td></tr>",
            jain_text(f.up),
            jain_text(f.down)
        );
    }
    o.push_str("</table>\n<h2>Parts</h2>\n<table class=\"parts\">\n<tr><th>part</th><th>test</th><th>flows</th><th>dir</th><th>tos</th><th>result</th><th>retransmits</th></tr>\n");
    for p in &s.parts {
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&p.name),
            p.test.name(),
            p.flows,
            p.direction,
            p.tos.map_or("-".into(), |t| format!("0x{t:02x}")),
            part_figure(p),
            p.tcp_retransmits.map_or("-".into(), |n| n.to_string())
        );
    }
    o.push_str("</table>\n");
    if let Some(ph) = &s.phases {
        o.push_str("<h2>Phases</h2>\n<table class=\"phases\">\n<tr><th>phase</th><th>from (s)</th><th>to (s)</th><th>probe p50</th><th>p90</th><th>p99</th><th>up</th><th>down</th></tr>\n");
        for (name, f, [p50, p90, p99]) in phase_rows(ph) {
            let _ = writeln!(
                o,
                "<tr><td>{name}</td><td>{:.2}</td><td>{:.2}</td><td>{p50}</td><td>{p90}</td><td>{p99}</td><td>{}</td><td>{}</td></tr>",
                f.start_s,
                f.end_s,
                BitsPerSec(f.throughput_up_bps),
                BitsPerSec(f.throughput_down_bps)
            );
        }
        let _ = writeln!(
            o,
            "</table>\n<p>The bulk flows' buffers drained in {:.2} s between loaded and recovery.</p>",
            ph.drain_s
        );
    }
    let _ = writeln!(
        o,
        "<h2>Throughput and probe latency</h2>\n{}",
        inline(&svg(r))
    );
    if let Some(cdf) = cdf_svg(r) {
        let _ = writeln!(
            o,
            "<h2>Probe latency, idle and loaded</h2>\n{}",
            inline(&cdf)
        );
    }
    o.push_str("<h2>Intervals</h2>\n<table class=\"intervals\">\n<tr><th>interval</th><th>phase</th><th>from (s)</th><th>to (s)</th><th>up</th><th>down</th><th>probe p50</th><th>fairness up</th><th>fairness down</th><th>retransmits</th></tr>\n");
    let (up, down) = (series(&s.parts, "up"), series(&s.parts, "down"));
    for (k, iv) in r.intervals.iter().enumerate() {
        let at = |v: &[(f64, f64)]| v.get(k).map_or("-".into(), |x| BitsPerSec(x.1).to_string());
        // The slowest probe's median, as the chart draws it.
        let probe = s
            .parts
            .iter()
            .filter(|p| p.direction == "rr")
            .filter_map(|p| p.intervals.get(k)?.latency_ns.as_ref().map(|l| l.p50))
            .max()
            .map_or("-".into(), |ns| ms(ns as f64));
        let retrans: Option<u64> = s
            .parts
            .iter()
            .filter_map(|p| p.intervals.get(k)?.tcp_retransmits)
            .reduce(|a, b| a + b);
        let (fu, fd) = iv.fairness.map_or(("-".into(), "-".into()), |f| {
            (jain_text(f.up), jain_text(f.down))
        });
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{:.2}</td><td>{:.2}</td><td>{}</td><td>{}</td><td>{probe}</td><td>{fu}</td><td>{fd}</td><td>{}</td></tr>",
            iv.index,
            phase_of(iv),
            iv.start_s,
            iv.end_s,
            at(&up),
            at(&down),
            retrans.map_or("-".into(), |n| n.to_string())
        );
    }
    o.push_str("</table>\n");
    warnings(&mut o, &s.warnings);
    o.push_str("</body></html>\n");
    o
}
