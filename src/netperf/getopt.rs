//! netperf's command line read as its getopt(3) reads it: short options,
//! clustered flags (`-cC`), a value in the same word (`-l10`) or the next
//! one (`-l 10`, `-D -0.20`: a required value is taken even when it starts
//! with a dash), and netperf's optional values: `-c [rate]` and `-C [rate]`
//! take the next word only when it starts with a digit, `-k [list]`,
//! `-o [list]` and `-O [list]` only when it does not start with a dash.
//! Options stop at `--`; what follows is the test's own options, read
//! again with the test's option letters.

use anyhow::{Result, bail};

/// How an option takes its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Takes {
    /// A flag: no value.
    Nothing,
    /// Always a value: the rest of the word or the next word.
    Value,
    /// A value only in the next word and only when it starts with a digit
    /// (netperf's `-c [rate]`).
    DigitValue,
    /// A value only in the next word and only when it does not start
    /// with a dash (netperf's `-k [list]`).
    WordValue,
}

/// One option as read: its letter and its value, if it took one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Opt {
    pub letter: char,
    pub value: Option<String>,
}

/// Read `args` with the option letters `takes` knows, until `--` or the
/// end. Returns the options in order and the words after `--`. `which`
/// names the option set in errors ("global" or the test's).
pub fn read(
    args: &[String],
    takes: &dyn Fn(char) -> Option<Takes>,
    which: &str,
) -> Result<(Vec<Opt>, Vec<String>)> {
    let mut opts = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let word = &args[i];
        i += 1;
        if word == "--" {
            return Ok((opts, args[i..].to_vec()));
        }
        let Some(letters) = word.strip_prefix('-').filter(|l| !l.is_empty()) else {
            bail!(
                "unexpected argument '{}' among netperf's {which} options (options are -X [VALUE]; test options go after --)",
                crate::text::echo(word)
            );
        };
        for (at, letter) in letters.char_indices() {
            let Some(how) = takes(letter) else {
                bail!(
                    "-{} is not one of netperf's {which} options taken here (see netperf --help)",
                    crate::text::echo(&letter.to_string())
                );
            };
            let rest = &letters[at + letter.len_utf8()..];
            let next = args.get(i);
            let value = match how {
                Takes::Nothing => None,
                Takes::Value if !rest.is_empty() => Some(rest.to_string()),
                Takes::Value => match next {
                    Some(v) => {
                        i += 1;
                        Some(v.clone())
                    }
                    None => bail!("-{letter} needs a value"),
                },
                Takes::DigitValue | Takes::WordValue if !rest.is_empty() => Some(rest.to_string()),
                Takes::DigitValue => next
                    .filter(|v| v.starts_with(|c: char| c.is_ascii_digit()))
                    .inspect(|_| i += 1)
                    .cloned(),
                Takes::WordValue => next
                    .filter(|v| !v.starts_with('-'))
                    .inspect(|_| i += 1)
                    .cloned(),
            };
            let took_rest = value.is_some() && !rest.is_empty() && how != Takes::Nothing;
            opts.push(Opt { letter, value });
            if took_rest {
                break;
            }
        }
    }
    Ok((opts, Vec::new()))
}

/// netperf's pairs (`break_args`): `A` sets both, `A,` the first only,
/// `,B` the second only, `A,B` each.
pub fn pair(s: &str) -> (Option<&str>, Option<&str>) {
    match s.split_once(',') {
        None => (Some(s), Some(s)),
        Some((a, b)) => ((!a.is_empty()).then_some(a), (!b.is_empty()).then_some(b)),
    }
}

/// netperf's explicit pairs (`break_args_explicit`): `A` sets the first
/// only.
pub fn explicit_pair(s: &str) -> (Option<&str>, Option<&str>) {
    match s.split_once(',') {
        None => ((!s.is_empty()).then_some(s), None),
        Some((a, b)) => ((!a.is_empty()).then_some(a), (!b.is_empty()).then_some(b)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn takes(c: char) -> Option<Takes> {
        match c {
            'l' | 'D' | 'H' => Some(Takes::Value),
            'c' | 'C' => Some(Takes::DigitValue),
            'k' => Some(Takes::WordValue),
            'P' | '4' => Some(Takes::Nothing),
            _ => None,
        }
    }

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn values_clusters_and_the_test_options() {
        let (o, rest) = read(
            &words("-l10 -D -0.20 -4P -c 50 -C -H h -- -m 1"),
            &takes,
            "global",
        )
        .unwrap();
        let got: Vec<(char, Option<&str>)> =
            o.iter().map(|o| (o.letter, o.value.as_deref())).collect();
        assert_eq!(
            got,
            [
                ('l', Some("10")),
                ('D', Some("-0.20")),
                ('4', None),
                ('P', None),
                ('c', Some("50")),
                ('C', None),
                ('H', Some("h")),
            ]
        );
        assert_eq!(rest, ["-m", "1"]);
        let (o, _) = read(&words("-k A,B -k -l 1"), &takes, "test").unwrap();
        assert_eq!(o[0].value.as_deref(), Some("A,B"));
        assert_eq!(o[1].value, None);
        let e = read(&words("-x"), &takes, "global")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("-x is not one of netperf's global options"),
            "{e}"
        );
        let e = read(&words("-l"), &takes, "global")
            .unwrap_err()
            .to_string();
        assert!(e.contains("-l needs a value"), "{e}");
        let e = read(&words("stray"), &takes, "global")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unexpected argument 'stray'"), "{e}");
    }

    #[test]
    fn pairs_as_netperf_breaks_them() {
        assert_eq!(pair("1"), (Some("1"), Some("1")));
        assert_eq!(pair("1,"), (Some("1"), None));
        assert_eq!(pair(",2"), (None, Some("2")));
        assert_eq!(explicit_pair("1"), (Some("1"), None));
        assert_eq!(explicit_pair("h,6"), (Some("h"), Some("6")));
    }
}
