//! What the commands share: the target (or an embedded server), writing
//! to standard output where a closed pipe is not an error, a single test's
//! chart that both `run` and `report` draw, and the aggregate's output
//! directory that both `agg` and `report` write.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};

use crate::agg::model::{AggResult, TestAgg};
use crate::control::client::Target;
use crate::control::server::EmbeddedServer;
use crate::export::draw::agg::{Labels, overall_svg, stream_svg};
use crate::export::{page, write_atomic};

/// Start an embedded server unless a target was given.
pub fn target_or_embedded(
    target: Option<Target>,
    bind: Option<std::net::IpAddr>,
) -> Result<(Target, Option<EmbeddedServer>)> {
    if let Some(t) = target {
        return Ok((t, None));
    }
    let server = EmbeddedServer::start().context("starting the embedded server")?;
    let t = Target {
        addr: server.addr,
        label: server.addr.to_string(),
        bind,
        embedded: true,
        psk: None,
        wait: None,
    };
    Ok((t, Some(server)))
}

/// The chart of one run of a single test, as its row names it (`--chart`,
/// and `report --out`'s chart.svg); None for a test that has none.
pub fn test_chart(r: &crate::result::TestResult) -> Option<String> {
    use crate::plan::kinds::Chart;
    r.test.traits().chart.map(|c| match c {
        Chart::Dispersion => crate::export::draw::capacity::svg(r),
    })
}

/// Write `text` to standard output; a reader that went away (`| head`) is
/// not an error.
pub fn print(text: &(impl AsRef<[u8]> + ?Sized)) -> Result<()> {
    let mut so = std::io::stdout().lock();
    match so.write_all(text.as_ref()).and_then(|_| so.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.context("writing to standard output"),
    }
}

/// What `agg` and `report` print of one test: the summary on stdout (none
/// with `--json`: the whole document comes at the end), warnings on stderr.
pub fn say_test(t: &TestAgg, out: &crate::cli::AggOutput) -> Result<()> {
    if !out.json {
        print(&crate::agg::model::summary_text(t, out.intervals))?;
    }
    for w in &t.warnings {
        eprintln!("warning: {w}");
    }
    Ok(())
}

/// What `agg` and `report` write when done: `--json` on stdout, each
/// `--export-json` file, and where the directory is (on stderr: a note,
/// not a result).
pub fn finish(r: &AggResult, out: &crate::cli::AggOutput, dir: Option<&Path>) -> Result<()> {
    if out.json {
        print(&format!("{}\n", serde_json::to_string_pretty(r)?))?;
    }
    for p in &out.export_json {
        write_atomic(p, &serde_json::to_vec_pretty(r)?)
            .with_context(|| format!("writing --export-json {}", p.display()))?;
    }
    if let Some(d) = dir {
        eprintln!("results in {}", d.display());
    }
    Ok(())
}

/// One row per sample per stream.
pub fn streams_csv(t: &TestAgg) -> String {
    let mut s = String::from("stream,server,start_unix_s,end_unix_s,interval_s,value,unit\n");
    for st in &t.streams {
        for x in &st.samples {
            s.push_str(&format!(
                "{},{},{:.6},{:.6},{:.6},{},{}\n",
                st.index,
                crate::text::csv_field(&st.server),
                x.start(),
                x.end,
                x.interval_s,
                x.value,
                crate::text::csv_field(&t.unit)
            ));
        }
    }
    s
}

/// File-name form of a test name.
pub fn file_part(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Write results.json, TEST_streams.csv, TEST_ramp.log, TEST_overall.svg,
/// report.html (and per-stream SVGs).
pub fn write_dir(dir: &Path, r: &AggResult, individual: bool) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("--out: creating {}", dir.display()))?;
    let w = |name: String, bytes: &[u8]| {
        let p = dir.join(&name);
        write_atomic(&p, bytes).with_context(|| format!("writing {}", p.display()))
    };
    w("results.json".into(), &serde_json::to_vec_pretty(r)?)?;
    let mut svgs = Vec::new();
    for t in &r.tests {
        let f = file_part(&t.name);
        w(format!("{f}_streams.csv"), streams_csv(t).as_bytes())?;
        w(
            crate::agg::ramplog::file_name(&f),
            crate::agg::ramplog::write(t, r.spec.trim_s).as_bytes(),
        )?;
        let svg = overall_svg(t, Labels::of(&r.spec));
        w(format!("{f}_overall.svg"), svg.as_bytes())?;
        svgs.push(svg);
        if individual {
            for (i, s) in t.streams.iter().enumerate() {
                w(
                    format!("{f}_stream_{}.svg", s.index),
                    stream_svg(t, i, Labels::of(&r.spec)).as_bytes(),
                )?;
            }
        }
    }
    w("report.html".into(), page::agg::report(r, &svgs).as_bytes())?;
    Ok(())
}
