//! The netperf front end: netperf 2.7's command line, read as netperf
//! reads it and turned into thrum's own plain request ([`Request`]: a
//! [`TestPlan`], the server, the repetition and how to print), so that
//! `netperf ARGS` (thrum reached through a link named `netperf`) and
//! `thrum netperf ARGS` run the seeds' command lines, netperf's example
//! scripts and flent unchanged against a `thrum server`.
//!
//! It exists apart from `cli` because netperf's command line is not
//! clap's: global options before `--` and the test's own after it, the
//! same letters meaning different things on either side (`-D` is demo
//! mode before and TCP_NODELAY after), optional values that depend on the
//! next word (`-c [rate]`, `-k [list]`), and pairs split netperf's way
//! (`-s 64K,` sets only the send buffer). [`getopt`] reads the words as
//! getopt(3) does; [`args`] maps each option onto the plan the way
//! `cli::RunArgs::to_request` fills it, and refuses what thrum cannot
//! honour with netperf's option named. How the result is printed
//! (netperf's tables, `-P 0` lines, the `-o`/`-O`/`-k` selectors, demo
//! mode's interim lines) is `export::netperf`'s; running it is
//! `cmd::netperf`'s.

pub mod args;
pub mod getopt;

use std::time::Duration;

use crate::control::client::Target;
use crate::control::repeat::Repeat;
use crate::export::netperf::{Demo, Print};
use crate::plan::TestPlan;

pub use args::parse;

/// netperf's control port, and thrum's when it stands in for netperf
/// (`thrum server -p 12865`).
pub const NETPERF_PORT: u16 = 12865;

/// What one netperf command line asks for, checked.
#[derive(Debug)]
pub enum Request {
    /// Run a test and print its result as netperf would.
    Run(Box<RunRequest>),
    /// `-h` (or `--help`): the options taken, on stdout.
    Help,
    /// `-V`: the version.
    Version,
}

/// A test to run: the plan, where, how often and how to print it.
#[derive(Debug)]
pub struct RunRequest {
    /// The checked plan: netperf's defaults (10 s, no warm-up) with every
    /// option applied.
    pub plan: TestPlan,
    /// `-H`/`-p` (default localhost, port 12865), `-L`, `-4`/`-6`.
    pub target: Target,
    /// `-i`/`-I`, with netperf's bounds (at least 3 runs, at most 30).
    pub repeat: Option<Repeat>,
    /// How the result is printed.
    pub print: Print,
    /// `-D`: interim results as the test runs.
    pub demo: Option<Demo>,
    /// `-s`: a pause before the test starts.
    pub wait: Duration,
    /// `-u`: the run's UUID; None: a random one.
    pub uuid: Option<String>,
    /// `-B`: the label carried in the result and printed after `-P 0`
    /// lines.
    pub brand: Option<String>,
    /// `--json`: the result as `thrum run --json` writes it.
    pub json: bool,
    /// Options taken without effect here, said on stderr before the run
    /// (`-F`: thrum fills its own buffers).
    pub notes: Vec<String>,
}

/// `thrum netperf --help` (and `netperf -h`): what is taken, what is
/// taken without effect, and what is refused.
pub const HELP: &str = "\
Usage: netperf [global options] -- [test options]
       thrum netperf [global options] -- [test options]

thrum taking netperf 2.7's command line: the test runs against a thrum
server (start one with `thrum server -p 12865`) and prints what netperf
prints. Tests (-t): TCP_STREAM (default), TCP_MAERTS, TCP_RR, TCP_CRR,
TCP_CC, UDP_STREAM, UDP_RR, omni. docs/netperf.md says where figures
differ from netperf's by design.

Global options taken:
    -H name|ip[,fam]  The server (default localhost); fam 4 or 6
    -p port           Its control port (default 12865)
    -L ip[,fam]       Local address of the control and data connections
    -4, -6            IPv4 or IPv6 only
    -t testname       The test
    -l testlen        Seconds (>0); 0: until Ctrl-C or the server's limit;
                      <0: that many bytes (stream) or transactions (rr)
    -D [-]secs[,units] Demo mode: an interim result every secs
    -f k|m|g|K|M|G|x  Units of throughput (default m; x: transactions)
    -c [rate], -C [rate]  Report local, remote CPU and service demand
    -i max,min        Iterations (3..30) until the confidence is reached
    -I lvl[,width]    Confidence level (95 or 99) and width in % (99,5)
    -P 0|1            Don't/do print the header and the column titles
    -v 0|1|2          Verbosity: the figure alone, the table, more
    -T lcpu,rcpu      Pin the local and the server's workers to a CPU
    -B brand          A label printed after -P 0 lines
    -s seconds        Wait this long before the test starts
    -Y ltos[,rtos]    IP_TOS of the data sockets (one value for both ends)
    -h, --help        This text;  -V  the version
    --json            Print thrum's JSON result (as thrum run --json)

Global options taken without effect (said on stderr):
    -F file (thrum fills its own buffers), -a/-A, -o/-O (alignment and
    offsets), -W, -n, -S, -k/-K, -r, -d, -j

Test options taken (after --):
    -m size           Send size (stream tests)
    -M rsize[,lsize]  Receive size (stream tests)
    -r req[,rsp]      Request and response sizes (rr tests)
    -b number         Burst: extra transactions in flight (TCP_RR, UDP_RR)
    -D                TCP_NODELAY on both ends
    -s send[,recv]    Local socket buffers;  -S send[,recv]  the server's
    -K algo           Congestion control (one algorithm for both ends)
    -G mss            TCP_MAXSEG;  -q rate  pacing, bytes/s
    -e secs           UDP_RR: a response this late counts as lost
    -k [list|file]    KEY=VALUE output of the omni selectors listed
    -o [list|file]    CSV output;  -O [list|file]  columns with titles
    -d send|recv|rr, -T tcp|udp, -c   omni: the test's direction, protocol,
                      a connection per transaction
    -H host[,fam]     The data connection's host: the server's own
    -L ip[,fam]       Local address of the data connections
    -u uuid           The run's UUID;  -R 0|1  taken without effect
    -4, -6            IPv4 or IPv6 only

Refused, with the option named: -N (no control connection), -Z
(thrum's keys: thrum run --psk-file), -w/-b (paced bursts: thrum run
--rate), -y, test options -P (data ports: thrum server --data-ports),
-p, -t, -C, -f, -F, -g, -I, -n, -N and tests other than those above.
";
