//! `thrum find-burst`: the burst search of runemomniaggdemo.sh against one
//! server, as a table or as JSON.

use std::process::ExitCode;

use anyhow::Result;

use super::out::print;
use crate::agg::{burst, run};
use crate::cli::FindBurstArgs;

/// A rise of less than this fraction ends the burst search.
pub const BURST_MIN_GAIN: f64 = 0.01;
/// `thrum find-burst`.
pub fn find_burst(args: &FindBurstArgs) -> Result<ExitCode> {
    let req = args.to_request()?;
    let s = run::find_burst(&req.target, req.probe, BURST_MIN_GAIN)?;
    if req.json {
        print(&format!("{}\n", serde_json::to_string_pretty(&s)?))?;
    } else {
        let mut o = String::from("   burst      trans/s\n");
        for (b, v) in &s.tried {
            o.push_str(&format!("{b:>8} {v:>12.1}\n"));
        }
        o.push_str(&format!(
            "burst {} (the last that raised transactions/s by more than {:.0} %; up to {})\n",
            s.burst,
            BURST_MIN_GAIN * 100.0,
            burst::MAX_BURST
        ));
        print(&o)?;
    }
    Ok(ExitCode::SUCCESS)
}
