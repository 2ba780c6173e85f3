//! The frame every page of `thrum web` shares: the head (the stylesheet
//! and the one script, both served from the binary: [`CSS`], [`JS`]), the
//! bar with the pages and the store's name, and the mark of the store's
//! state the script watches to refresh the page when runs arrive.

use std::fmt::Write;

use crate::text::escape_markup as esc;

/// The stylesheet, `/assets/web.css`.
pub const CSS: &str = include_str!("assets/web.css");
/// The script, `/assets/web.js`: it only polls `/api/version`.
pub const JS: &str = include_str!("assets/web.js");

/// The pages of the bar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nav {
    Overview,
    History,
    Compare,
    /// A run's page: no entry of the bar is its.
    Run,
}

/// What a page needs besides its body.
pub struct Frame<'a> {
    pub title: &'a str,
    pub nav: Nav,
    /// The store's name, shown in the bar.
    pub store: &'a str,
    /// The store's change mark when drawn: the script reloads the page
    /// when it moves. None: the page does not refresh (a run's page).
    pub version: Option<&'a str>,
}

/// The whole page: `body` (markup, already escaped) in the frame.
pub fn page(f: &Frame, body: &str) -> String {
    let mut o = String::with_capacity(body.len() + 2048);
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>{} · thrum</title><link rel=\"icon\" href=\"data:,\">\
<link rel=\"stylesheet\" href=\"/assets/web.css\"><script src=\"/assets/web.js\" defer></script></head>\n",
        esc(f.title)
    );
    match f.version {
        Some(v) => {
            let _ = write!(o, "<body data-version=\"{}\">", esc(v));
        }
        None => o.push_str("<body>"),
    }
    let here = |n: Nav| if f.nav == n { " class=\"here\"" } else { "" };
    let _ = write!(
        o,
        "<header class=\"top\"><a class=\"brand\" href=\"/\">thrum</a><nav>\
<a href=\"/\"{}>Overview</a><a href=\"/history\"{}>History</a><a href=\"/compare\"{}>Compare</a></nav>\
<span id=\"live\"></span><span class=\"store\" title=\"the results store, read-only\">{}</span></header>\n<main>\n",
        here(Nav::Overview),
        here(Nav::History),
        here(Nav::Compare),
        esc(f.store)
    );
    o.push_str(body);
    o.push_str("\n</main></body></html>\n");
    o
}

/// A status badge.
pub fn badge(class: &str, text: &str) -> String {
    format!(
        "<span class=\"badge st-{}\">{}</span>",
        esc(class),
        esc(text)
    )
}

/// Labels as `k=v, k=v`, escaped; `—` without any.
pub fn labels(l: &crate::store::Labels) -> String {
    if l.is_empty() {
        return "—".into();
    }
    l.iter()
        .map(|(k, v)| esc(&format!("{k}={v}")))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A stored time as the pages show it: local, to the second, the UTC
/// time in its tooltip.
pub fn time(unix_s: f64) -> String {
    let local = crate::units::fmt_local_time(unix_s, true);
    let shown = match (local.find('.'), local.rfind(' ')) {
        (Some(dot), Some(sp)) if sp > dot => format!("{}{}", &local[..dot], &local[sp..]),
        (Some(dot), _) => local[..dot].to_string(),
        _ => local,
    };
    format!(
        "<time datetime=\"{0}\" title=\"{0}\">{1}</time>",
        crate::clock::rfc3339(unix_s),
        esc(&shown)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_frame_escapes_what_it_is_given() {
        let p = page(
            &Frame {
                title: "<t>",
                nav: Nav::History,
                store: "/x/\"db\"",
                version: Some("3-7"),
            },
            "<p>body</p>",
        );
        assert!(p.contains("<title>&lt;t&gt; · thrum</title>"));
        assert!(p.contains("&quot;db&quot;"));
        assert!(p.contains("data-version=\"3-7\""));
        assert!(p.contains("<a href=\"/history\" class=\"here\">"));
        assert!(!p.contains("<script>"), "no inline script");
        let mut l = crate::store::Labels::new();
        l.insert("k".into(), "<b>".into());
        assert_eq!(labels(&l), "k=&lt;b&gt;");
    }
}
