//! Where and how `thrum run` writes its result: the flags ([`OutputArgs`])
//! and the plain [`Outputs`] they become, which is what `cmd::run` reads.

use std::path::PathBuf;

use clap::Args;

/// The main output's format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Human,
    Json,
    Keyval,
    /// `--csv`: one CSV line of the output fields.
    Csv,
}

/// `--output-fields` as one flag value (a newtype, so clap does not take it for repeated values).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldList(pub Vec<String>);

fn field_list(s: &str) -> Result<FieldList, String> {
    crate::export::fields::parse_list(s).map(FieldList)
}

fn rate_unit(s: &str) -> Result<crate::units::RateUnit, String> {
    crate::units::RateUnit::from_letter(s).ok_or_else(|| {
        format!(
            "'{}' is not a unit (accepted: {})",
            crate::text::echo(s),
            crate::units::RateUnit::LETTERS
        )
    })
}

/// Where and how results are written.
#[derive(Debug, Args, Clone)]
pub struct OutputArgs {
    /// Write the result as one JSON document (schema thrum.result.v1).
    #[arg(long, conflicts_with = "keyval")]
    #[arg(help_heading = super::heading::OUTPUT)]
    pub json: bool,
    /// Write the result as netperf-style KEY=value lines.
    ///
    /// Write the result as netperf-style KEY=value lines (only the --output-fields, when given).
    #[arg(long, conflicts_with = "csv")]
    #[arg(help_heading = super::heading::OUTPUT)]
    pub keyval: bool,
    /// Write the --output-fields as one CSV line (netperf's -o).
    ///
    /// Write the --output-fields (default THROUGHPUT,THROUGHPUT_UNITS) as one CSV line under a header of their names (netperf's -o).
    #[arg(long, conflicts_with = "json")]
    #[arg(help_heading = super::heading::OUTPUT)]
    pub csv: bool,
    /// netperf's output selectors (-o/-O/-k): the fields shown.
    ///
    /// netperf's omni output selectors (-o/-O/-k): the fields, by netperf's names and thrum's own (THROUGHPUT,THROUGHPUT_UNITS,MEAN_LATENCY,P99_LATENCY,LOCAL_CPU_UTIL,REMOTE_SD, …), that --csv, --keyval or, alone, one human line shows; all (netperf's -o all) is every field.
    #[arg(long, value_parser = field_list, value_name = "LIST", conflicts_with = "json")]
    #[arg(help_heading = super::heading::OUTPUT)]
    pub output_fields: Option<FieldList>,
    /// Rates in k/m/g bits/s or K/M/G bytes/s (netperf's -f).
    ///
    /// Show rates in one unit (netperf's and iperf3's -f): k, m, g are 10^3, 10^6, 10^9 bits/s; K, M, G are 2^10, 2^20, 2^30 bytes/s. It applies to the human table (interval rows and the summary's throughput) and to THROUGHPUT and THROUGHPUT_UNITS in --output-fields, --csv and --keyval (default there: m, 10^6bits/s); JSON, --json-stream, --samples and THROUGHPUT_BPS stay in bits/s.
    #[arg(short = 'f', long, value_parser = rate_unit, value_name = "k|m|g|K|M|G")]
    #[arg(help_heading = super::heading::OUTPUT)]
    pub format: Option<crate::units::RateUnit>,
    /// Write the result to FILE instead of standard output.
    ///
    /// Write the result to FILE instead of standard output ('-' is standard output). A regular file is replaced atomically through an exclusively created temp file; a FIFO or device is written directly.
    #[arg(short = 'o', long, value_name = "FILE")]
    #[arg(help_heading = super::heading::OUTPUT)]
    pub output: Option<PathBuf>,
    /// Write per-interval, per-flow samples as CSV to FILE.
    ///
    /// Write per-interval, per-flow samples as CSV to FILE, a row at a time as they arrive; the finished file replaces it atomically at the end. As neper's samples.csv: each flow's row carries that flow's latency in the interval (in the finished file) and each end's process usage over it (utime, stime, maxrss, faults, context switches); docs/json.md lists the columns.
    #[arg(long, value_name = "FILE")]
    #[arg(help_heading = super::heading::OUTPUT)]
    pub samples: Option<PathBuf>,
    /// Write JSON Lines as the test runs: each interval, then the result.
    ///
    /// Write JSON Lines to standard output as the test runs: one line per interval as it completes, then the whole result as the last line.
    #[arg(long, conflicts_with_all = ["json", "keyval", "output"])]
    #[arg(help_heading = super::heading::OUTPUT)]
    pub json_stream: bool,
    /// Also write the result as JSON to FILE (repeatable).
    ///
    /// Also write the result as JSON to FILE, beside the output on the terminal (repeatable; hyperfine's habit).
    #[arg(long, value_name = "FILE")]
    #[arg(help_heading = super::heading::OUTPUT)]
    pub export_json: Vec<PathBuf>,
    /// Also write the samples as CSV to FILE (repeatable).
    ///
    /// Also write the per-interval, per-flow samples as CSV to FILE (repeatable).
    #[arg(long, value_name = "FILE")]
    #[arg(help_heading = super::heading::OUTPUT)]
    pub export_csv: Vec<PathBuf>,
    /// Also write KEY=value lines to FILE (repeatable).
    ///
    /// Also write the result as netperf-style KEY=value lines to FILE (repeatable).
    #[arg(long, value_name = "FILE")]
    #[arg(help_heading = super::heading::OUTPUT)]
    pub export_keyval: Vec<PathBuf>,
}

/// What `thrum run` writes, and where: the output flags, checked by clap
/// (the formats exclude each other) and plain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outputs {
    /// The main output's format (`--json`, `--keyval`, `--csv`, or human).
    pub format: Format,
    /// `--output-fields`: the fields `--csv`, `--keyval` or one human line show.
    pub fields: Option<Vec<String>>,
    /// `-o FILE`; None: standard output.
    pub output: Option<PathBuf>,
    /// `--format`: the unit of THROUGHPUT in the field outputs (and of the
    /// human table's rates, which `Human` carries).
    pub units: Option<crate::units::RateUnit>,
    /// `--samples FILE`: per-interval, per-flow CSV as the test runs.
    pub samples: Option<PathBuf>,
    /// `--json-stream`: JSON Lines on standard output as the test runs.
    pub json_stream: bool,
    /// `--export-json`, `--export-csv`, `--export-keyval`: files beside the main output.
    pub export_json: Vec<PathBuf>,
    pub export_csv: Vec<PathBuf>,
    pub export_keyval: Vec<PathBuf>,
}

impl Outputs {
    /// The human text on standard output (or `-o`), the one output that
    /// can show rows live and says warnings on stderr.
    pub fn is_human(&self) -> bool {
        self.format == Format::Human && !self.json_stream
    }
}

impl OutputArgs {
    /// The plain outputs.
    pub fn to_outputs(&self) -> Outputs {
        let format = if self.json {
            Format::Json
        } else if self.keyval {
            Format::Keyval
        } else if self.csv {
            Format::Csv
        } else {
            Format::Human
        };
        Outputs {
            format,
            fields: self.output_fields.as_ref().map(|f| f.0.clone()),
            output: self.output.clone(),
            units: self.format,
            samples: self.samples.clone(),
            json_stream: self.json_stream,
            export_json: self.export_json.clone(),
            export_csv: self.export_csv.clone(),
            export_keyval: self.export_keyval.clone(),
        }
    }
}
