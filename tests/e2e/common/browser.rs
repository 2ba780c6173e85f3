//! Headless Chromium for the tests of thrum's pages: found on the path,
//! or the test is skipped (failed under `THRUM_E2E_CHROMIUM=required`,
//! as CI sets it); a page's DOM after its scripts ran, a screenshot, and
//! how much of a screenshot is ink.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::command::Ran;
use super::processes::run_cmd;

/// The Chromium binary on the path, if any.
pub fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser"].into_iter().find(|c| {
        Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// Chromium, or None after saying why `what` is not checked; a panic
/// when `THRUM_E2E_CHROMIUM=required`.
pub fn chromium_or_skip(what: &str) -> Option<&'static str> {
    let found = chromium();
    if found.is_none() {
        let msg = format!("chromium not found; {what} is not checked");
        if std::env::var("THRUM_E2E_CHROMIUM").as_deref() == Ok("required") {
            panic!("{msg}");
        }
        eprintln!("SKIPPED: {msg}");
    }
    found
}

/// Chromium headless with a profile of its own under `dir` (no sandbox:
/// the tests run as root), the flags that keep it off the network, and `args`.
pub fn headless(browser: &str, dir: &Path, args: &[&str]) -> Ran {
    let profile = tempfile::tempdir_in(dir).expect("a profile directory");
    run_cmd(
        Command::new(browser)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--hide-scrollbars",
                &format!("--user-data-dir={}", profile.path().display()),
            ])
            .args(args),
        Duration::from_secs(90),
    )
}

/// The DOM of `url` after its scripts ran (three seconds of virtual time).
pub fn dump_dom(browser: &str, dir: &Path, url: &str) -> String {
    let out = headless(
        browser,
        dir,
        &["--dump-dom", "--virtual-time-budget=3000", url],
    );
    out.stdout()
}

/// A screenshot of `url` into `png`, `size` as `W,H`.
pub fn screenshot(browser: &str, dir: &Path, url: &str, png: &Path, size: &str) {
    let out = headless(
        browser,
        dir,
        &[
            &format!("--screenshot={}", png.display()),
            &format!("--window-size={size}"),
            url,
        ],
    );
    assert!(png.is_file(), "no screenshot of {url}\n{}", out.report());
}

/// A PNG's pixels (each its samples), decoded.
pub fn pixels(png: &Path) -> Vec<Vec<u8>> {
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(png).expect("the screenshot opens"),
    ));
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size().expect("a size")];
    let info = reader.next_frame(&mut buf).expect("a frame");
    let px = info.color_type.samples();
    buf[..info.buffer_size()]
        .chunks(px)
        .map(<[u8]>::to_vec)
        .collect()
}

/// How many distinct colours a screenshot has, and the share of its
/// pixels that are not white.
pub fn ink(pixels: &[Vec<u8>]) -> (usize, f64) {
    let distinct: std::collections::HashSet<&[u8]> = pixels.iter().map(Vec::as_slice).collect();
    let white = pixels.iter().filter(|p| p[..3] == [255, 255, 255]).count();
    (
        distinct.len(),
        1.0 - white as f64 / pixels.len().max(1) as f64,
    )
}
