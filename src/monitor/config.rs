//! The monitor's configuration file (TOML): a `[defaults]` table and a
//! list of `[[probe]]` tables, checked into [`Probe`]s before anything
//! starts. Every error names the probe (its index from 1, and its name
//! where it has one) and the field, with what is accepted. A probe's own
//! `labels` go on every series of its metrics, so they are held to
//! Prometheus' rules for label names here, once, rather than found out
//! by a scrape that Prometheus refuses.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use thiserror::Error;
use toml::{Table, Value};

use crate::plan::TestKind;
use crate::units::parse_duration;

/// A probe runs at least this far apart: a shorter period would measure
/// the monitor's own start-up more than the network.
pub const MIN_EVERY: Duration = Duration::from_secs(1);
/// A shorter measurement holds too few transactions or echoes to say much.
pub const MIN_DURATION: Duration = Duration::from_millis(100);
/// What a probe's process may take beyond its measurement (connecting,
/// the warm-up, the drain, writing its result) before it is killed, unless
/// the probe sets `timeout`.
pub const DEFAULT_MARGIN: Duration = Duration::from_secs(15);
const DEFAULT_EVERY: Duration = Duration::from_secs(60);
const DEFAULT_DURATION: Duration = Duration::from_secs(5);

/// How long a mix's idle and recovery phases last unless the probe's
/// `args` set `--idle`/`--recovery`: `thrum run`'s defaults.
const MIX_PHASE: Duration = Duration::from_secs(5);

/// The most labels a probe may carry: every series of the probe carries
/// them all, and a fleet's dashboards group by a few (site, region, link).
pub const MAX_LABELS: usize = 16;

/// Label names the metrics set themselves, and the two Prometheus sets
/// on every scraped series (a probe's `job` or `instance` would be
/// renamed `exported_job` by the scrape, and so lost to its queries).
pub const RESERVED_LABELS: &[&str] = &[
    "probe",
    "target",
    "test",
    "le",
    "quantile",
    "reason",
    "direction",
    "job",
    "instance",
];

/// The test a probe runs: one of `thrum run`'s, a mix (a preset such as
/// `rrul`, or `mix` with the probe's own `mix` SPEC), or `thrum ping`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeTest {
    Run(TestKind),
    /// The preset's name, or `mix` for a SPEC of the probe's own.
    Mix(&'static str),
    Ping,
}

impl ProbeTest {
    pub fn name(self) -> &'static str {
        match self {
            ProbeTest::Run(k) => k.name(),
            ProbeTest::Mix(name) => name,
            ProbeTest::Ping => "ping",
        }
    }
}

/// One probe, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Probe {
    /// Unique among the probes: the `probe` label of its metrics.
    pub name: String,
    /// `HOST[:PORT]` for a `thrum run` test, `HOST` for ping.
    pub target: String,
    pub test: ProbeTest,
    /// Further arguments to the probe's command, as written.
    pub args: Vec<String>,
    /// The period between the starts of two runs (jittered).
    pub every: Duration,
    /// The measurement window (`-l`; a mix's loaded phase, between its
    /// idle and recovery phases), or the span of a ping's echoes.
    pub duration: Duration,
    /// The run's process is killed when it outlasts this.
    pub timeout: Duration,
    /// A `mix` probe's SPEC (`--mix`); none for the presets and single tests.
    pub mix: Option<String>,
    /// The probe's own labels (`labels = { site = "ams" }`, over the
    /// defaults' labels), on every series of its metrics and on every run
    /// it saves.
    pub labels: BTreeMap<String, String>,
}

impl Probe {
    /// The host part of the target: probes to one host never run at once.
    pub fn host(&self) -> &str {
        host_of(&self.target)
    }
}

/// The configuration, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub probes: Vec<Probe>,
}

#[derive(Debug, Error, PartialEq)]
pub enum ConfigError {
    #[error("{0}")]
    Toml(String),
    #[error("{at}: unknown key `{key}` (accepted: {accepted})")]
    UnknownKey {
        at: String,
        key: String,
        accepted: &'static str,
    },
    #[error("{at}.{field}: {problem}")]
    Field {
        at: String,
        field: &'static str,
        problem: String,
    },
    #[error(
        "no [[probe]] in the file (accepted: one or more [[probe]] tables with target and test)"
    )]
    NoProbe,
}

const TOP_KEYS: &str = "defaults, probe";
const DEFAULT_KEYS: &str = "every, duration, timeout, labels";
const PROBE_KEYS: &str = "name, target, test, mix, args, every, duration, timeout, labels";

/// The host of `HOST`, `HOST:PORT`, `[V6]:PORT` or a bare IPv6 address.
pub fn host_of(target: &str) -> &str {
    if let Some(rest) = target.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match target.split_once(':') {
        Some((host, port)) if !port.contains(':') => host,
        _ => target,
    }
}

fn field(at: &str, field: &'static str, problem: impl Into<String>) -> ConfigError {
    ConfigError::Field {
        at: at.to_string(),
        field,
        problem: problem.into(),
    }
}

fn duration_of(v: &Value, at: &str, name: &'static str) -> Result<Duration, ConfigError> {
    let s = v.as_str().ok_or_else(|| {
        field(
            at,
            name,
            format!(
                "{v} is not a duration (accepted: a string such as \"60s\", \"500ms\", \"1m30s\")"
            ),
        )
    })?;
    parse_duration(s).map_err(|e| field(at, name, e.to_string()))
}

fn string_of(v: &Value, at: &str, name: &'static str) -> Result<String, ConfigError> {
    match v.as_str() {
        Some(s) if !s.trim().is_empty() => Ok(s.to_string()),
        Some(_) => Err(field(at, name, "is empty")),
        None => Err(field(at, name, format!("{v} is not a string"))),
    }
}

/// The flags a probe's command sets itself, refused in `args`.
fn reserved(test: ProbeTest) -> &'static [&'static str] {
    match test {
        ProbeTest::Run(_) | ProbeTest::Mix(_) => &[
            "-H",
            "--host",
            "-l",
            "--length",
            "--duration",
            "--json",
            "-n",
            "--transactions",
            "--mix",
        ],
        ProbeTest::Ping => &["--json"],
    }
}

/// Whether `name` may name a label: Prometheus' rule
/// (`[a-zA-Z_][a-zA-Z0-9_]*`), without its reserved `__` prefix.
fn label_name_ok(name: &str) -> bool {
    let mut c = name.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
        && !name.starts_with("__")
}

/// A `labels` table checked: each name by Prometheus' rules and not one
/// the metrics or Prometheus set, each value a string the results store
/// takes as a label (the probe's runs are saved with them).
fn labels_of(v: &Value, at: &str) -> Result<BTreeMap<String, String>, ConfigError> {
    let accepted = "accepted: a table of strings such as { site = \"ams\", region = \"eu\" }";
    let t = v
        .as_table()
        .ok_or_else(|| field(at, "labels", format!("{v} is not a table ({accepted})")))?;
    if t.len() > MAX_LABELS {
        return Err(field(
            at,
            "labels",
            format!("{} labels (accepted: at most {MAX_LABELS})", t.len()),
        ));
    }
    let mut out = BTreeMap::new();
    for (k, v) in t {
        if !label_name_ok(k) {
            return Err(field(
                at,
                "labels",
                format!(
                    "{k:?} is not a label name (accepted: a letter or _, then letters, digits or _; not starting with __)"
                ),
            ));
        }
        if RESERVED_LABELS.contains(&k.as_str()) {
            return Err(field(
                at,
                "labels",
                format!(
                    "{k:?} is set by the monitor or by Prometheus (reserved: {})",
                    RESERVED_LABELS.join(", ")
                ),
            ));
        }
        let value = match v.as_str() {
            Some(s) if !s.is_empty() => s,
            // Prometheus takes an empty value as the label's absence.
            Some(_) => return Err(field(at, "labels", format!("{k} is empty ({accepted})"))),
            None => {
                return Err(field(
                    at,
                    "labels",
                    format!("{k} = {v} is not a string ({accepted})"),
                ));
            }
        };
        crate::store::parse_new_label(&format!("{k}={value}"))
            .map_err(|e| field(at, "labels", e))?;
        out.insert(k.clone(), value.to_string());
    }
    Ok(out)
}

/// The value `args` give `flag` (`--flag V` or `--flag=V`), the last one.
fn arg_value<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    let mut found = None;
    for (i, a) in args.iter().enumerate() {
        if a == flag {
            found = args.get(i + 1).map(String::as_str);
        } else if let Some(v) = a.strip_prefix(flag).and_then(|r| r.strip_prefix('=')) {
            found = Some(v);
        }
    }
    found
}

/// How long a run of the probe measures: `duration`, and for a mix its
/// idle and recovery phases around it (`--idle`, `--recovery` in `args`,
/// else 5 s each).
fn span(test: ProbeTest, args: &[String], duration: Duration) -> Duration {
    if !matches!(test, ProbeTest::Mix(_)) {
        return duration;
    }
    let phase = |flag| {
        arg_value(args, flag)
            .and_then(|v| parse_duration(v).ok())
            .unwrap_or(MIX_PHASE)
    };
    duration + phase("--idle") + phase("--recovery")
}

/// Parse and check the file's text.
pub fn parse(text: &str) -> Result<Config, ConfigError> {
    let top: Table = text
        .parse()
        .map_err(|e: toml::de::Error| ConfigError::Toml(e.to_string().trim_end().to_string()))?;
    for key in top.keys() {
        if !["defaults", "probe"].contains(&key.as_str()) {
            return Err(ConfigError::UnknownKey {
                at: "the file".into(),
                key: key.clone(),
                accepted: TOP_KEYS,
            });
        }
    }
    let mut every = DEFAULT_EVERY;
    let mut duration = DEFAULT_DURATION;
    let mut timeout = None;
    let mut default_labels = BTreeMap::new();
    if let Some(d) = top.get("defaults") {
        let at = "[defaults]";
        let d = d
            .as_table()
            .ok_or_else(|| ConfigError::Toml(format!("{at} is not a table")))?;
        for (k, v) in d {
            match k.as_str() {
                "every" => every = duration_of(v, at, "every")?,
                "duration" => duration = duration_of(v, at, "duration")?,
                "timeout" => timeout = Some(duration_of(v, at, "timeout")?),
                "labels" => default_labels = labels_of(v, at)?,
                _ => {
                    return Err(ConfigError::UnknownKey {
                        at: at.into(),
                        key: k.clone(),
                        accepted: DEFAULT_KEYS,
                    });
                }
            }
        }
    }
    let list = match top.get("probe") {
        None => return Err(ConfigError::NoProbe),
        Some(Value::Array(a)) => a,
        Some(_) => {
            return Err(ConfigError::Toml(
                "`probe` must be a list of tables, written [[probe]]".into(),
            ));
        }
    };
    if list.is_empty() {
        return Err(ConfigError::NoProbe);
    }
    let mut probes = Vec::new();
    let mut names = BTreeSet::new();
    for (i, p) in list.iter().enumerate() {
        let mut at = format!("probe {}", i + 1);
        let t = p
            .as_table()
            .ok_or_else(|| ConfigError::Toml(format!("{at} is not a table")))?;
        for k in t.keys() {
            if !PROBE_KEYS.split(", ").any(|a| a == k) {
                return Err(ConfigError::UnknownKey {
                    at,
                    key: k.clone(),
                    accepted: PROBE_KEYS,
                });
            }
        }
        let given_name = t
            .get("name")
            .map(|v| string_of(v, &at, "name"))
            .transpose()?;
        if let Some(n) = &given_name {
            at = format!("probe {} ({n})", i + 1);
        }
        let target = match t.get("target") {
            Some(v) => string_of(v, &at, "target")?,
            None => {
                return Err(field(
                    &at,
                    "target",
                    "is missing (accepted: HOST or HOST:PORT)",
                ));
            }
        };
        if target.chars().any(char::is_whitespace) || target.starts_with('-') {
            return Err(field(
                &at,
                "target",
                format!("{target:?} is not a host (accepted: HOST or HOST:PORT)"),
            ));
        }
        let test_name = match t.get("test") {
            Some(v) => string_of(v, &at, "test")?,
            None => {
                return Err(field(
                    &at,
                    "test",
                    format!("is missing (accepted: {})", tests_accepted()),
                ));
            }
        };
        let test = if test_name.eq_ignore_ascii_case("ping") {
            ProbeTest::Ping
        } else if test_name == "mix" {
            ProbeTest::Mix("mix")
        } else if let Some(p) = crate::plan::mix::preset(&test_name) {
            ProbeTest::Mix(p.name)
        } else {
            ProbeTest::Run(test_name.parse().map_err(|_| {
                field(
                    &at,
                    "test",
                    format!(
                        "unknown test {test_name:?} (accepted: {})",
                        tests_accepted()
                    ),
                )
            })?)
        };
        let mix = match (t.get("mix"), test) {
            (Some(v), ProbeTest::Mix("mix")) => {
                let spec = string_of(v, &at, "mix")?;
                crate::plan::mix::parse_spec(&spec)
                    .map_err(|e| field(&at, "mix", e.to_string()))?;
                Some(spec)
            }
            (None, ProbeTest::Mix("mix")) => {
                return Err(field(
                    &at,
                    "mix",
                    "is missing (accepted: test = \"mix\" with mix = \"SPEC\", as `thrum run --mix` takes it)",
                ));
            }
            (Some(_), _) => {
                return Err(field(
                    &at,
                    "mix",
                    format!(
                        "applies only to test = \"mix\" (this probe's test is {})",
                        test.name()
                    ),
                ));
            }
            (None, _) => None,
        };
        let mut labels = default_labels.clone();
        if let Some(v) = t.get("labels") {
            labels.extend(labels_of(v, &at)?);
        }
        if labels.len() > MAX_LABELS {
            return Err(field(
                &at,
                "labels",
                format!(
                    "{} labels with the defaults' (accepted: at most {MAX_LABELS})",
                    labels.len()
                ),
            ));
        }
        let args = match t.get("args") {
            None => Vec::new(),
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| {
                    v.as_str().map(str::to_string).ok_or_else(|| {
                        field(&at, "args", format!("{v} is not a string (accepted: a list of strings such as [\"-r\", \"64,64\"])"))
                    })
                })
                .collect::<Result<_, _>>()?,
            Some(v) => {
                return Err(field(&at, "args", format!("{v} is not a list (accepted: a list of strings such as [\"-r\", \"64,64\"])")));
            }
        };
        for a in &args {
            let flag = a.split('=').next().unwrap_or(a);
            if reserved(test).contains(&flag) {
                return Err(field(
                    &at,
                    "args",
                    format!(
                        "{flag} is set by the monitor (target, duration, --json); remove it from args"
                    ),
                ));
            }
        }
        let every = t
            .get("every")
            .map(|v| duration_of(v, &at, "every"))
            .transpose()?
            .unwrap_or(every);
        let duration = t
            .get("duration")
            .map(|v| duration_of(v, &at, "duration"))
            .transpose()?
            .unwrap_or(duration);
        let timeout = t
            .get("timeout")
            .map(|v| duration_of(v, &at, "timeout"))
            .transpose()?
            .or(timeout)
            .unwrap_or(span(test, &args, duration) + DEFAULT_MARGIN);
        let measured = span(test, &args, duration);
        if every < MIN_EVERY {
            return Err(field(
                &at,
                "every",
                format!("{every:?} is too short (accepted: at least {MIN_EVERY:?})"),
            ));
        }
        if duration < MIN_DURATION {
            return Err(field(
                &at,
                "duration",
                format!("{duration:?} is too short (accepted: at least {MIN_DURATION:?})"),
            ));
        }
        // A mix measures its idle and recovery phases besides `duration`.
        let (what, phases) = if measured > duration {
            (
                format!("duration {duration:?} with the mix's idle and recovery, {measured:?}"),
                " with the idle and recovery phases",
            )
        } else {
            (format!("duration {duration:?}"), "")
        };
        if every < measured {
            return Err(field(
                &at,
                "every",
                format!("{every:?} is shorter than {what} (accepted: every >= duration{phases})"),
            ));
        }
        if timeout <= measured {
            return Err(field(
                &at,
                "timeout",
                format!(
                    "{timeout:?} is not longer than {what} (accepted: more than duration{phases})"
                ),
            ));
        }
        let name = given_name.unwrap_or_else(|| format!("{}@{target}", test.name()));
        // Each run is saved labelled `probe=NAME`, a label a save bounds:
        // refused here, once, rather than by every run of the probe.
        crate::store::parse_new_label(&format!("probe={name}"))
            .map_err(|e| field(&at, "name", e))?;
        if !names.insert(name.clone()) {
            return Err(field(
                &at,
                "name",
                format!("{name:?} is another probe's name too (give each probe a distinct `name`)"),
            ));
        }
        probes.push(Probe {
            name,
            target,
            test,
            args,
            every,
            duration,
            timeout,
            mix,
            labels,
        });
    }
    Ok(Config { probes })
}

fn tests_accepted() -> String {
    let mut v: Vec<&str> = TestKind::ALL.into_iter().map(TestKind::name).collect();
    v.extend(crate::plan::mix::PRESETS.iter().map(|p| p.name));
    v.extend(["mix", "ping"]);
    v.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = r#"
[defaults]
every = "60s"
duration = "5s"
[[probe]]
target = "lg1:12880"
test = "tcp_rr"
args = ["-r", "64,64"]
[[probe]]
target = "lg1"
test = "ping"
every = "10s"
"#;

    #[test]
    fn an_rr_and_a_ping_probe_parse() {
        let c = parse(EXAMPLE).unwrap();
        assert_eq!(c.probes.len(), 2);
        let rr = &c.probes[0];
        assert_eq!(rr.name, "tcp_rr@lg1:12880");
        assert_eq!(rr.test, ProbeTest::Run(TestKind::TcpRr));
        assert_eq!(rr.args, ["-r", "64,64"]);
        assert_eq!(rr.every, Duration::from_secs(60));
        assert_eq!(rr.duration, Duration::from_secs(5));
        assert_eq!(rr.timeout, Duration::from_secs(20));
        assert_eq!(rr.host(), "lg1");
        let ping = &c.probes[1];
        assert_eq!(ping.test, ProbeTest::Ping);
        assert_eq!(ping.every, Duration::from_secs(10));
        assert_eq!(ping.host(), "lg1");
    }

    /// docs/monitor.md's example file is one the monitor takes.
    #[test]
    fn the_docs_example_parses() {
        let doc = include_str!("../../docs/monitor.md");
        let toml = doc
            .split("```toml\n")
            .nth(1)
            .and_then(|s| s.split("```").next())
            .expect("a toml block in docs/monitor.md");
        let c = parse(toml).unwrap();
        assert_eq!(c.probes[0].name, "lg1-rr");
        assert_eq!(c.probes[1].every, Duration::from_secs(10));
    }

    #[test]
    fn labels_mixes_and_their_spans() {
        let c = parse(
            "[defaults]\nlabels = { site = \"ams\", region = \"eu\" }\n\
             [[probe]]\ntarget = \"a\"\ntest = \"tcp_rr\"\nlabels = { site = \"fra\", link = \"x \\\"y\\\"\" }\n\
             [[probe]]\ntarget = \"b\"\ntest = \"rrul\"\nevery = \"20s\"\n\
             [[probe]]\ntarget = \"c\"\ntest = \"mix\"\nmix = \"tcp_stream,udp_rr@rate=10\"\nduration = \"2s\"\nevery = \"5s\"\nargs = [\"--idle=1s\", \"--recovery\", \"1s\"]\n",
        )
        .unwrap();
        let [rr, rrul, mix] = &c.probes[..] else {
            panic!("{c:?}")
        };
        let l = |p: &Probe| {
            p.labels
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        assert_eq!(l(rr), "link=x \"y\",region=eu,site=fra");
        assert_eq!(l(rrul), "region=eu,site=ams");
        assert_eq!(rrul.test, ProbeTest::Mix("rrul"));
        assert_eq!(rrul.name, "rrul@b");
        // 5 s measured, 5 s idle and 5 s recovery, and the margin.
        assert_eq!(rrul.timeout, Duration::from_secs(30));
        assert_eq!(mix.mix.as_deref(), Some("tcp_stream,udp_rr@rate=10"));
        assert_eq!(mix.timeout, Duration::from_secs(19));
        let e = err("[[probe]]\ntarget = \"b\"\ntest = \"rrul\"\nevery = \"10s\"\n");
        assert_eq!(
            e,
            "probe 1.every: 10s is shorter than duration 5s with the mix's idle and recovery, 15s (accepted: every >= duration with the idle and recovery phases)"
        );
    }

    #[test]
    fn bad_labels_are_refused_by_name() {
        let probe = |labels: &str| {
            err(&format!(
                "[[probe]]\ntarget = \"a\"\ntest = \"ping\"\nlabels = {labels}\n"
            ))
        };
        let e = probe("{ \"9site\" = \"x\" }");
        assert!(
            e.starts_with("probe 1.labels: \"9site\" is not a label name"),
            "{e}"
        );
        let e = probe("{ \"si-te\" = \"x\" }");
        assert!(e.contains("is not a label name"), "{e}");
        let e = probe("{ __name__ = \"x\" }");
        assert!(e.contains("not starting with __"), "{e}");
        for reserved in ["probe", "le", "instance", "job", "reason"] {
            let e = probe(&format!("{{ {reserved} = \"x\" }}"));
            assert!(e.contains("is set by the monitor or by Prometheus"), "{e}");
        }
        let e = probe("{ site = 3 }");
        assert!(e.contains("site = 3 is not a string"), "{e}");
        let e = probe("{ site = \"\" }");
        assert!(e.contains("site is empty"), "{e}");
        let e = probe("{ site = \"a\\nb\" }");
        assert!(e.contains("control character"), "{e}");
        let e = probe("\"ams\"");
        assert!(e.contains("is not a table"), "{e}");
        let many: Vec<String> = (0..17).map(|i| format!("l{i} = \"v\"")).collect();
        let e = probe(&format!("{{ {} }}", many.join(", ")));
        assert!(e.contains("at most 16"), "{e}");
        let e = err("[[probe]]\ntarget = \"a\"\ntest = \"mix\"\n");
        assert!(e.starts_with("probe 1.mix: is missing"), "{e}");
        let e = err("[[probe]]\ntarget = \"a\"\ntest = \"tcp_rr\"\nmix = \"tcp_stream\"\n");
        assert!(e.contains("applies only to test = \"mix\""), "{e}");
        let e = err("[[probe]]\ntarget = \"a\"\ntest = \"mix\"\nmix = \"tcp_flood\"\n");
        assert!(e.starts_with("probe 1.mix: "), "{e}");
    }

    #[test]
    fn hosts() {
        assert_eq!(host_of("lg1"), "lg1");
        assert_eq!(host_of("10.0.0.1:12880"), "10.0.0.1");
        assert_eq!(host_of("[::1]:12880"), "::1");
        assert_eq!(host_of("fe80::1"), "fe80::1");
    }

    fn err(text: &str) -> String {
        parse(text).unwrap_err().to_string()
    }

    #[test]
    fn errors_name_the_probe_and_field() {
        let e = err(
            "[[probe]]\ntarget = \"a\"\ntest = \"tcp_rr\"\n[[probe]]\ntarget = \"b\"\ntest = \"tcp_rr\"\nevry = \"1s\"\n",
        );
        assert_eq!(
            e,
            "probe 2: unknown key `evry` (accepted: name, target, test, mix, args, every, duration, timeout, labels)"
        );
        let e = err("[[probe]]\ntarget = \"a\"\ntest = \"tcp_rr\"\nevery = \"5 parsecs\"\n");
        assert!(e.starts_with("probe 1.every: "), "{e}");
        let e = err(
            "[[probe]]\nname = \"x\"\ntarget = \"a\"\ntest = \"tcp_rr\"\nevery = \"2s\"\nduration = \"3s\"\n",
        );
        assert_eq!(
            e,
            "probe 1 (x).every: 2s is shorter than duration 3s (accepted: every >= duration)"
        );
        let e = err("[[probe]]\ntarget = \"a\"\ntest = \"tcp_rrr\"\n");
        assert!(
            e.starts_with("probe 1.test: unknown test \"tcp_rrr\" (accepted: tcp_stream"),
            "{e}"
        );
        let e = err("[[probe]]\ntest = \"ping\"\n");
        assert!(e.starts_with("probe 1.target: is missing"), "{e}");
        let long = "n".repeat(257);
        let e = err(&format!(
            "[[probe]]\nname = \"{long}\"\ntarget = \"a\"\ntest = \"ping\"\n"
        ));
        assert!(
            e.contains(".name: the value of 'probe' is 257 characters"),
            "{e}"
        );
        let e = err("[[probe]]\ntarget = \"a\"\ntest = \"tcp_rr\"\nargs = [\"-l\", \"3s\"]\n");
        assert!(
            e.starts_with("probe 1.args: -l is set by the monitor"),
            "{e}"
        );
        let e = err("[defaults]\nduration = 5\n[[probe]]\ntarget = \"a\"\ntest = \"ping\"\n");
        assert!(
            e.starts_with("[defaults].duration: 5 is not a duration"),
            "{e}"
        );
        let e = err(
            "[[probe]]\ntarget = \"a\"\ntest = \"ping\"\n[[probe]]\ntarget = \"a\"\ntest = \"ping\"\n",
        );
        assert!(
            e.starts_with("probe 2.name: \"ping@a\" is another probe's name"),
            "{e}"
        );
        assert_eq!(
            err("[defaults]\nevery = \"1m\"\n"),
            ConfigError::NoProbe.to_string()
        );
        assert!(err("[[probe]\n").contains("line 1"));
        let e = err("wat = 1\n[[probe]]\ntarget = \"a\"\ntest = \"ping\"\n");
        assert_eq!(e, "the file: unknown key `wat` (accepted: defaults, probe)");
    }
}
