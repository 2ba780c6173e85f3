//! The tests that must not run beside others, declared as two groups in
//! one table, and the lock that keeps them apart.
//!
//! [`ALONE`]: each shaped-link test (modules `netns`, `one_way`,
//! `rrul_netns`, `fleet`, `mesh`, `rr_matching`, `udp_loss`, the shaped
//! `capacity`, `curve`, `ping`, `store`, `gate` and `netperf_front`
//! tests), the CPU-heavy `hostile`, `scale`, `soak` and `spin` tests and
//! the `agg` ramps (whose streams flood every CPU) run one at a time, and
//! never beside a test of the other group. On two vCPUs the 1-byte tcp_rr test keeps both
//! CPUs busy, and that delays tbf's dequeue timer: once the bucket is full
//! (64 KB is 2.6 ms at 200 Mbit/s), late tokens are lost, and a concurrent
//! bulk test read 0.92 of the rate instead of the 0.955 it reads alone
//! (and iperf3 reads).
//!
//! [`NOT_BESIDE_FLOODS`]: loopback tests that assume the CPUs keep up (a
//! lossless UDP path, rr responses well within --rr-timeout, window
//! lengths and rates within 5 %) run beside each other, but never beside a
//! test of [`ALONE`], whose floods starve a loopback receiver into real
//! loss.
//!
//! Every other test runs beside anything.
//!
//! A test does not ask for its group: the harness does, in [`enter`], which
//! everything that starts a process or a namespace calls first
//! ([`bin`](super::bin), the namespace probe, the setup commands). libtest
//! runs each test on a thread of its own named after it (`module::test`,
//! with one test thread too), so [`enter`] looks that name up in the table
//! once per thread and keeps the group's guard in a thread-local until the
//! thread ends, after the test's own values (its servers, its namespaces)
//! are dropped, as a guard declared first in the test was.

use std::cell::RefCell;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Tests that run one at a time and never beside [`NOT_BESIDE_FLOODS`]:
/// `module::` for every test of a module, or `module::test`.
pub const ALONE: &[&str] = &[
    // Shaped links: a rate, a delay or a loss read against what the
    // shaper allows.
    "netns::",
    "one_way::",
    "rrul_netns::",
    "fleet::",
    "mesh::",
    "rr_matching::",
    "udp_loss::",
    "capacity::capacity_reads_the_htb_rate",
    "capacity::capacity_says_when_a_bucket_is_deeper_than_the_trains",
    "capacity::capacity_counts_the_routers_drops",
    "capacity::capacity_names_a_deep_bucket",
    "capacity::capacity_holds_under_cross_traffic",
    "capacity::capacity_reverse_and_both_read_each_direction",
    "capacity::capacity_packets_fill_a_jumbo_path",
    "capacity::capacity_packet_size_follows_the_family_and_caps_on_loopback",
    "curve::curve_udp_rr_saturates_at_the_shaped_rate",
    "curve::curve_tcp_rr_saturates_at_the_shaped_rate",
    "ping::ping_rtt_agrees_with_iputils",
    "ping::ping_without_privilege_names_the_ways_out",
    "ping::ping_loss_agrees_with_iputils_when_the_router_drops",
    "ping::ping_of_nobody_ends_with_an_error_within_the_timeout",
    "ping::ping_tcp_times_connects_to_a_server",
    "store::compare_calls_like_runs_alike_and_a_narrower_path_a_regression",
    "store::aa_twenty_pairs",
    "store::compare_finds_a_standing_queue_in_p50",
    // Sets of runs compared over an htb: a host's burst reads as a change.
    "gate::sets_call_like_alike_and_a_narrower_path_a_regression",
    "gate::a_a_ten_pairs_and_a_b_three",
    "gate::rrul_with_a_deeper_fifo_regresses_latency_under_load",
    // netperf's command lines and flent's rrul through thrum as netperf,
    // their rates read against htb 50 Mbit/s.
    "netperf_front::netperf_command_lines_on_a_shaped_path",
    "netperf_front::flent_rrul_runs_over_thrum_as_netperf",
    // Many streams at once: a flood for the loopback accuracy tests.
    "agg::agg_ramps_two_servers_and_its_steps_sum_the_streams",
    "agg::find_burst_and_sweep_on_loopback",
    "agg::agg_sync_runs_one_stream_to_each_server_in_turn",
    "agg::agg_rr_ramps_one_byte_tcp_rr_streams",
    "agg::agg_hosts_dns_takes_every_address_of_a_name",
    "agg::agg_tells_of_a_stalled_sampler_and_keeps_no_zero_length_samples",
    "interrupt::agg_keeps_the_steps_it_completed",
    // Both CPUs flat out: a 1-byte tcp_rr beside 500 hostile connections;
    // 100k datagrams/s each way; 10,000 flows; a minute of back-to-back
    // streams; spinning CPUs.
    "hostile::hostile_clients_do_not_disturb_a_running_test",
    "open_loop::udp_rr_holds_its_rate_to_100k_and_littles_law",
    "scale::ten_thousand_tcp_rr_flows_each_complete_their_share",
    "scale::flows_spread_past_a_narrow_ephemeral_range",
    "soak::",
    // Spinning workers: a whole CPU each, on both ends.
    "spin::",
    "stdio::quiet_by_default_and_everything_in_the_files",
    // Sieges: four addresses reopening every handshake or port they may,
    // as fast as the server drops them, and a client beside them that must
    // be served every time within its deadlines.
    "server_hardening::keyed_clients_are_served_beside_unproved_connections",
    "server_hardening::a_keyless_server_serves_beside_unproved_connections",
    "server_hardening::one_address_cannot_hold_every_port",
];

/// Tests that run beside each other but never beside [`ALONE`].
pub const NOT_BESIDE_FLOODS: &[&str] = &[
    // Window lengths and rates within 5 %.
    "loopback::every_test_one_flow_one_thread",
    "loopback::every_test_eight_flows_two_threads",
    "measure::iterations_stop_on_the_confidence_rule_and_report_it",
    "measure::service_demand_with_iterations_is_the_mean_of_the_iterations",
    "capacity::capacity_runs_on_loopback_with_conservation",
    "capacity::capacity_on_loopback_says_what_its_figures_are",
    "curve::curve_loopback_writes_every_output_and_report_rerenders",
    "curve::curve_auto_steps_up_from_the_closed_loop_probe",
    // A schedule held, or a stall charged, to within a few per cent.
    "open_loop::a_stall_is_charged_to_every_transaction_due_in_it",
    "open_loop::the_offered_rate_is_held",
    "open_loop::tcp_cc_open_loop_holds_its_rate",
    "open_loop::a_count_limited_open_loop_runs_exactly_n_on_schedule",
    "open_loop::open_loop_samples_carry_late_counts_and_service_time",
    // A lossless UDP path, rr responses well within --rr-timeout.
    "udp::udp_stream_accounts_for_every_datagram",
    "udp::udp_rr_one_and_many_flows",
    "udp::udp_rr_count_limit_is_exact",
    "uring::udp_tests_run_and_add_up_on_uring",
    "uring::busy_poll_is_applied_on_both_ends",
    "uring::uring_napi_busy_poll_is_read_back_on_both_ends",
    "uring::uring_napi_busy_poll_is_read_back_across_a_veth",
    "uring::aggregate_rr_runs_on_the_completion_path_and_adds_up",
    "uring::completion_path_moves_exactly_the_bytes_of_its_transactions",
    "uring::close_rst_on_uring_leaves_no_time_wait",
    "scale::flows_past_the_descriptor_limit_are_refused_up_front_by_either_end",
    // Connections as fast as both CPUs go: not beside the shaped-link and
    // pinned-latency tests, whose CPUs it would take.
    "uring::connection_tests_run_on_uring_and_add_up",
];

/// [`ALONE`] takes it to write, [`NOT_BESIDE_FLOODS`] to read.
static FLOODS: RwLock<()> = RwLock::new(());

/// Whether table entry `entry` names test `test` (`module::name`).
fn names(entry: &str, test: &str) -> bool {
    if entry.ends_with("::") {
        test.starts_with(entry)
    } else {
        test == entry
    }
}

/// A group's hold on [`FLOODS`].
enum Hold {
    Alone {
        _guard: RwLockWriteGuard<'static, ()>,
    },
    Shared {
        _guard: RwLockReadGuard<'static, ()>,
    },
    Free,
}

thread_local! {
    /// The test this thread runs and its group's hold, from the first
    /// [`enter`] to the thread's end.
    static HELD: RefCell<Option<(String, Hold)>> = const { RefCell::new(None) };
}

/// Take the lock of the running test's group, once per test: a no-op on a
/// thread that is not a test's (unnamed: a helper thread a test spawned)
/// and for a test in no group. With `THRUM_E2E_SERIAL_LOG` set, each test
/// says on stderr which group it runs in.
pub fn enter() {
    let me = std::thread::current();
    let Some(test) = me.name() else {
        return;
    };
    HELD.with(|held| {
        let mut held = held.borrow_mut();
        if held.as_ref().is_some_and(|(t, _)| t == test) {
            return;
        }
        // A thread that ran another test before (a harness that reused
        // threads) lets that test's hold go first.
        *held = None;
        // A failed test poisons the lock; the next one should still run.
        let hold = if ALONE.iter().any(|e| names(e, test)) {
            Hold::Alone {
                _guard: FLOODS.write().unwrap_or_else(|p| p.into_inner()),
            }
        } else if NOT_BESIDE_FLOODS.iter().any(|e| names(e, test)) {
            Hold::Shared {
                _guard: FLOODS.read().unwrap_or_else(|p| p.into_inner()),
            }
        } else {
            Hold::Free
        };
        if std::env::var_os("THRUM_E2E_SERIAL_LOG").is_some() {
            let group = match hold {
                Hold::Alone { .. } => "alone",
                Hold::Shared { .. } => "not beside floods",
                Hold::Free => "free",
            };
            eprintln!("serial: {test} runs {group}");
        }
        *held = Some((test.to_string(), hold));
    });
}

/// Every entry of the table names a module of the suite, and a test of it:
/// a test renamed or moved would otherwise leave its group silently.
#[test]
fn the_groups_name_tests_that_exist() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e");
    for entry in ALONE.iter().chain(NOT_BESIDE_FLOODS) {
        let (module, test) = entry.split_once("::").expect("module::test");
        let src = std::fs::read_to_string(dir.join(format!("{module}.rs")))
            .unwrap_or_else(|e| panic!("{entry}: no module {module} ({e})"));
        if !test.is_empty() {
            assert!(
                src.contains(&format!("fn {test}()")),
                "{entry}: no test {test} in {module}.rs"
            );
        }
    }
}
