//! `thrum web` end to end: six real tcp_rr runs saved in a store of the
//! test's own (three labelled case=a, three case=b with a 16× larger
//! request), served by the real binary on loopback, read with raw HTTP
//! (hostile targets, methods and sizes, the JSON the CLI gives) and in
//! headless Chromium (the overview naming the test and the runs, a run's
//! chart, a comparison's verdicts, the history's charts, a screenshot that
//! is not blank); its comparison of two labels is `thrum compare`'s, run
//! for run; a run saved while it serves moves `/api/version`; an address
//! beyond loopback needs a token, which is asked for and never echoed; a
//! stored sweep's page is the one `report --out` writes, heat map and all.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::common::{ServerProc, Thrum, chromium_or_skip, dump_dom, ink, pixels, screenshot};

/// `thrum web` serving `db`, killed when dropped.
struct Web {
    child: Child,
    addr: String,
}

impl Web {
    /// Start it with `args` after `--db DB`; its address is the one its
    /// first line on stderr names.
    fn start(db: &Path, args: &[&str]) -> Web {
        let mut child = Thrum::cmd(&["web", "--db"])
            .arg(db)
            .args(args)
            .command()
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("thrum web starts");
        let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
        let line = lines
            .by_ref()
            .map_while(Result::ok)
            .find(|l| l.contains("http://"))
            .expect("a line naming its address");
        // Read on, so that a later line never meets a closed pipe.
        std::thread::spawn(move || lines.for_each(drop));
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|s| s.split('/').next())
            .unwrap_or_else(|| panic!("no address in {line:?}"))
            .to_string();
        Web { child, addr }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The raw answer to `request` (a whole HTTP/1.1 request).
    fn raw(&self, request: &[u8]) -> String {
        let mut c = TcpStream::connect(&self.addr).expect("connect");
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        c.write_all(request).expect("send");
        let mut s = Vec::new();
        let _ = c.read_to_end(&mut s);
        String::from_utf8_lossy(&s).into_owned()
    }

    /// `GET path` with `headers`: the status and the body.
    fn get(&self, path: &str, headers: &str) -> (u16, String) {
        let answer = self.raw(
            format!(
                "GET {path} HTTP/1.1\r\nHost: {}\r\n{headers}\r\n",
                self.addr
            )
            .as_bytes(),
        );
        let status = answer
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no status in {answer:?}"));
        let body = answer
            .split_once("\r\n\r\n")
            .map_or(String::new(), |(_, b)| b.to_string());
        (status, body)
    }

    fn json(&self, path: &str) -> Value {
        let (status, body) = self.get(path, "");
        assert_eq!(status, 200, "{path}: {body}");
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"))
    }
}

impl Drop for Web {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One short tcp_rr run saved in `db`, labelled `case=CASE`.
fn save_run(db: &Path, case: &str, extra: &[&str]) {
    Thrum::run("tcp_rr")
        .len("2s")
        .arg("--label")
        .arg(format!("case={case}"))
        .args(extra)
        .arg("--db")
        .arg(db)
        .ok();
}

/// Six runs, three a case, alternating.
fn six_runs(db: &Path) {
    for _ in 0..3 {
        save_run(db, "a", &[]);
        save_run(db, "b", &["-r", "1024,64"]);
    }
}

#[test]
fn web_serves_the_store_to_raw_http_and_a_headless_browser() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.db");
    six_runs(&db);
    let web = Web::start(&db, &["--listen", "127.0.0.1:0"]);

    // The same rows `history --json` gives, and compare's figures.
    let rows = web.json("/api/history?test=tcp_rr");
    let rows = rows.as_array().expect("an array");
    assert_eq!(rows.len(), 6);
    let cli = Thrum::cmd(&["history", "--test", "tcp_rr", "--db"])
        .arg(&db)
        .json();
    assert_eq!(
        rows.iter().map(|r| &r["id"]).collect::<Vec<_>>(),
        cli.as_array()
            .unwrap()
            .iter()
            .map(|r| &r["id"])
            .collect::<Vec<_>>()
    );
    let newest = rows[0]["id"].as_str().unwrap().to_string();
    // A label is every run so labelled, as `thrum compare` takes it.
    let c = web.json("/api/compare?a=label:case%3Da&b=label:case%3Db");
    let cli = Thrum::cmd(&["compare", "label:case=a", "label:case=b", "--db"])
        .arg(&db)
        .json();
    assert_eq!((&c["a_runs"], &c["b_runs"]), (&3.into(), &3.into()), "{c}");
    for k in ["a_ids", "b_ids", "gate"] {
        assert_eq!(c[k], cli[k], "{k}: the page's {c}\nthe CLI's {cli}");
    }
    let figures = c["figures"].as_array().expect("figures");
    assert!(
        figures.iter().any(|f| f["name"] == "transactions_per_s"),
        "{c}"
    );
    assert!(figures.iter().all(|f| f["verdict"].is_string()), "{c}");
    let overview = web.json("/api/overview");
    assert_eq!(
        overview.as_array().unwrap().len(),
        2,
        "two setups: {overview}"
    );
    assert_eq!(web.json(&format!("/api/runs/{newest}"))["test"], "tcp_rr");

    // Hostile requests.
    for path in [
        "/runs/../../etc/passwd",
        "/runs/%2e%2e/%2e%2e/etc/passwd",
        "/runs/..%2F..%2Fetc%2Fpasswd",
        "/%2e%2e/etc/passwd",
    ] {
        let (status, _) = web.get(path, "");
        assert!(status == 400 || status == 404, "{path}: {status}");
    }
    assert_eq!(web.get("/etc/passwd", "").0, 404);
    let post = web.raw(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc");
    assert!(post.starts_with("HTTP/1.1 405 "), "{post}");
    let long = format!("/history?test={}", "a".repeat(4000));
    let status = web.get(&long, "").0;
    assert!(status == 414 || status == 431, "a 4 kB query: {status}");
    let huge = format!("GET /?x={} HTTP/1.1\r\n\r\n", "a".repeat(9000));
    let answer = web.raw(huge.as_bytes());
    assert!(
        answer.starts_with("HTTP/1.1 431 ") || answer.starts_with("HTTP/1.1 414 "),
        "{answer:.60}"
    );
    // Without a token, only a loopback name is answered (DNS rebinding).
    let foreign = web.raw(b"GET / HTTP/1.1\r\nHost: evil.example\r\n\r\n");
    assert!(foreign.starts_with("HTTP/1.1 421 "), "{foreign:.80}");

    // A run saved while it serves moves the mark the pages poll.
    // Its labels and name are markup a page must show as text.
    let before = web.json("/api/version")["version"].clone();
    save_run(
        &db,
        "a",
        &[
            "--label",
            "note=<img src=x onerror=alert(1)>",
            "--name",
            "<script>alert(2)</script>",
        ],
    );
    let after = web.json("/api/version");
    assert_ne!(after["version"], before);
    assert_eq!(after["runs"], 7);

    let Some(browser) = chromium_or_skip("thrum web's pages") else {
        return;
    };
    let home = dump_dom(browser, dir.path(), &web.url("/"));
    assert!(home.contains("tcp_rr") && home.contains(&newest), "{home}");
    assert!(home.contains("case=a") && home.contains("case=b"));
    assert!(
        home.contains("&lt;img src=x onerror=alert(1)&gt;"),
        "{home}"
    );
    assert!(!home.contains("<img") && !home.contains("<script>alert"));
    let run = dump_dom(browser, dir.path(), &web.url(&format!("/runs/{newest}")));
    assert!(run.contains("<svg"), "no chart on the run's page");
    assert!(run.contains("thrum run tcp_rr"), "the command again");
    let cmp = dump_dom(
        browser,
        dir.path(),
        &web.url("/compare?a=label:case=a&b=label:case=b"),
    );
    assert!(
        ["improved", "regressed", "no change", "inconclusive"]
            .iter()
            .any(|v| cmp.contains(&format!(">{v}<"))),
        "no verdict: {cmp}"
    );
    let hist = dump_dom(browser, dir.path(), &web.url("/history?test=tcp_rr"));
    assert!(hist.contains("<svg") && hist.contains("case=b"), "{hist}");
    assert!(!hist.contains("<img") && !hist.contains("<script>alert"));
    let shot = dir.path().join("overview.png");
    screenshot(browser, dir.path(), &web.url("/"), &shot, "1400,1000");
    let (distinct, inked) = ink(&pixels(&shot));
    assert!(distinct > 20, "only {distinct} colours: a blank page");
    assert!(inked > 0.02, "{inked:.4} of the page is not white");
}

#[test]
fn web_beyond_loopback_needs_a_token_and_never_echoes_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.db");
    save_run(&db, "a", &[]);
    Thrum::cmd(&["web", "--listen", "0.0.0.0:0", "--db"])
        .arg(&db)
        .refused(&["--token-file", "loopback"]);
    let token = "e2eTokenOfThrumWeb0123456789";
    let file = dir.path().join("token");
    std::fs::write(&file, format!("{token}\n")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let web = Web::start(
        &db,
        &[
            "--listen",
            "127.0.0.1:0",
            "--token-file",
            file.to_str().unwrap(),
        ],
    );
    let (status, body) = web.get("/", "");
    assert_eq!(status, 401);
    assert!(!body.contains(token));
    assert_eq!(web.get("/api/version", "").0, 401);
    let (status, _) = web.get(
        "/api/version",
        &format!("Authorization: Bearer {token}\r\n"),
    );
    assert_eq!(status, 200);
    let (status, _) = web.get(
        "/api/version",
        "Authorization: Bearer wrong-token-wrong-token\r\n",
    );
    assert_eq!(status, 401);
    let answer = web.raw(
        format!(
            "GET /history?token={token}&test=tcp_rr HTTP/1.1\r\nHost: {}\r\n\r\n",
            web.addr
        )
        .as_bytes(),
    );
    assert!(answer.starts_with("HTTP/1.1 303 "), "{answer}");
    let lower = answer.to_ascii_lowercase();
    assert!(
        lower.contains("\r\nlocation: /history?test=tcp_rr\r\n"),
        "{answer}"
    );
    assert!(lower.contains("httponly") && lower.contains("samesite=strict"));
    let (status, body) = web.get("/", &format!("Cookie: thrum_token={token}\r\n"));
    assert_eq!(status, 200);
    assert!(body.contains("tcp_rr") && !body.contains(token));
    // SIGTERM ends it as it ends `thrum monitor`: status 0.
    let mut web = web;
    let pid = web.child.id() as i32;
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let status = web.child.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

#[test]
fn a_stored_sweeps_page_is_its_tables_and_heat_map() {
    let server = ServerProc::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.db");
    let doc = Thrum::sweep("tcp_rr")
        .on(&server)
        .args(["--burst", "0,8", "--flows", "1,2"])
        .len("300ms")
        .arg("--db")
        .arg(&db)
        .timeout(Duration::from_secs(90))
        .json();
    let web = Web::start(&db, &["--listen", "127.0.0.1:0"]);
    let rows = web.json("/api/history?test=tcp_rr");
    let id = rows[0]["id"].as_str().expect("the sweep's id");
    let (status, page) = web.get(&format!("/runs/{id}"), "");
    assert_eq!(status, 200, "{page}");
    // The page `report --out` writes: the table, and its heat map, every
    // cell's rate in both.
    assert!(page.contains("<table class=\"sweep\">"), "{page}");
    assert!(page.contains("<svg"), "no heat map: {page}");
    for c in doc["cells"].as_array().expect("cells") {
        let rate = format!("{:.0}", c["transactions_per_s"].as_f64().unwrap());
        assert!(page.contains(&format!("<td>{rate}")), "{rate}: {page}");
        // plotters writes a text's content on a line of its own.
        assert!(page.lines().any(|l| l.trim() == rate), "{rate}: {page}");
    }
}
