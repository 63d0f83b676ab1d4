// SPDX-License-Identifier: MIT
//
// <shmclock/shmclock.hpp> from C++17, compiled with -Wall -Wextra -Werror
// (meson test cxx). A writer in this process drives the clock; TAP output.
#include <shmclock/shmclock.hpp>

#include <atomic>
#include <memory>
#include <stdexcept>
#include <cerrno>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

using namespace std::chrono_literals;
using shmclock::sim_clock;
using steady = std::chrono::steady_clock;

static int tests, failures;
static bool case_ok;

#define CHECK(cond)                                                                   \
	do {                                                                          \
		if (!(cond)) {                                                        \
			std::printf("# %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
			case_ok = false;                                              \
		}                                                                     \
	} while (0)

template <class F>
static void run(const char *name, F fn)
{
	case_ok = true;
	try {
		fn();
	} catch (const std::exception &e) {
		std::printf("# unexpected exception: %s\n", e.what());
		case_ok = false;
	}
	tests++;
	failures += !case_ok;
	std::printf("%s %d - %s\n", case_ok ? "ok" : "not ok", tests, name);
	std::fflush(stdout);
}

static double real_ms(steady::time_point since)
{
	return std::chrono::duration<double, std::milli>(steady::now() - since).count();
}

int main()
{
	const std::string name = "cxx-" + std::to_string(getpid());
	const std::string other = name + "-none";
	setenv("SHMCLOCK_NAME", name.c_str(), 1);
	std::printf("1..19\n");

	shmclock::writer w{ name };
	w.set_time(sim_clock::time_point(1s));
	shmclock::clock c{ name };

	run("sim_clock is a chrono clock", [&] {
		static_assert(!sim_clock::is_steady, "simulated time pauses and jumps");
		static_assert(std::is_same_v<sim_clock::duration, std::chrono::nanoseconds>);
		sim_clock::time_point a = sim_clock::now();
		sim_clock::time_point b = a + 250ms;
		CHECK(b - a == 250ms);
		CHECK(std::chrono::duration_cast<std::chrono::milliseconds>(b.time_since_epoch()) >= 1250ms);
		CHECK(c.now() >= a);
		CHECK(sim_clock::instance().name() == name);
	});

	run("sleep_for at scale 10 lasts a tenth in real time", [&] {
		w.set_scale(10);
		auto t0 = steady::now();
		auto s0 = c.now();
		c.sleep_for(500ms);
		CHECK(c.now() - s0 >= 500ms);
		std::printf("# 500 ms simulated at scale 10: %.1f ms real\n", real_ms(t0));
		CHECK(real_ms(t0) < 250);
		t0 = steady::now();
		shmclock::sleep_until(sim_clock::now() + 300ms);
		CHECK(real_ms(t0) < 150);
		w.set_scale(1);
	});

	run("sleep_until waits out a pause", [&] {
		w.pause();
		std::thread resume([&] {
			std::this_thread::sleep_for(200ms);
			w.resume();
		});
		auto t0 = steady::now();
		c.sleep_until(c.now() + 50ms);
		resume.join();
		std::printf("# 50 ms simulated across a 200 ms pause: %.1f ms real\n", real_ms(t0));
		CHECK(real_ms(t0) >= 200);
	});

	run("condition_variable wait_until in simulated time", [&] {
		std::mutex m;
		std::condition_variable cv;
		std::unique_lock<std::mutex> lk(m);
		w.set_scale(10);
		auto t0 = steady::now();
		CHECK(c.wait_until(cv, lk, c.now() + 1s) == std::cv_status::timeout);
		CHECK(real_ms(t0) < 500); // 100 ms real at scale 10
		bool ready = false;
		std::thread notifier([&] {
			std::this_thread::sleep_for(20ms);
			std::lock_guard<std::mutex> g(m);
			ready = true;
			cv.notify_all();
		});
		CHECK(shmclock::wait_until(cv, lk, sim_clock::now() + 100s, [&] { return ready; }));
		notifier.join();
		w.set_scale(1);
	});

	run("jump callbacks, removed by the handle's destructor", [&] {
		std::vector<std::pair<std::int64_t, bool>> seen;
		{
			auto h = c.on_jump([&](const shmclock_jump_t &j, bool before) {
				seen.emplace_back(j.delta_ns, before);
			});
			w.set_time(sim_clock::time_point(0s));
			(void)c.now(); // this thread delivers the jump
			CHECK(seen.size() == 2);
			CHECK(seen.size() == 2 && seen[0].second && !seen[1].second && seen[0].first < 0);
		}
		w.set_time(sim_clock::time_point(5s));
		(void)c.now();
		CHECK(seen.size() == 2);
	});

	run("a throwing callback does not unwind through C", [&] {
		auto h = c.on_jump([](const shmclock_jump_t &, bool) { throw std::runtime_error("no"); });
		w.set_time(sim_clock::time_point(7s));
		CHECK(c.now() >= sim_clock::time_point(7s));
	});

	run("errors are std::system_error with the errno", [&] {
		try {
			shmclock::clock none{ other };
			CHECK(!"opened a clock that does not exist");
		} catch (const std::system_error &e) {
			CHECK(e.code() == std::errc::no_such_file_or_directory);
			CHECK(std::string(e.what()).find(other) != std::string::npos);
		}
		try {
			shmclock::writer second{ name };
			CHECK(!"a second writer");
		} catch (const std::system_error &e) {
			CHECK(e.code() == std::errc::device_or_resource_busy);
		}
		try {
			w.set_scale(-1);
			CHECK(!"a negative scale");
		} catch (const std::system_error &e) {
			CHECK(e.code() == std::errc::invalid_argument);
		}
	});

	run("rate keeps its period", [&] {
		// Never early, whatever the load: the k-th period ends at least
		// k periods after the rate began (its start is read at or after
		// c0), counting the periods it reports missed (a thread not run
		// for one on a loaded machine: issue 52 saw a missed period
		// fail the former "none missed, 10 ms apart").
		auto c0 = c.now();
		shmclock::rate r{ c, 20ms };
		std::uint64_t periods = 0;
		for (int i = 0; i < 4; i++) {
			periods += 1 + r.sleep();
			CHECK(c.now() - c0 >= periods * 20ms);
		}
		CHECK(periods < 1000); // a count, not garbage
	});

	run("clock and writer move", [&] {
		shmclock::clock a{ name };
		shmclock::clock b = std::move(a);
		CHECK(a.native_handle() == nullptr);
		CHECK(b.now() >= sim_clock::time_point(7s));
		CHECK(w.info().writer_alive);
	});

	run("now_monotonic_ns ignores a jump back", [&] {
		shmclock::clock c{ name };
		w.pause();
		std::int64_t m0 = c.now_monotonic_ns(), j0 = c.info().jump_total_ns;
		w.set_time(c.now() - 30s);
		CHECK(c.now_monotonic_ns() == m0);
		CHECK(c.info().jump_total_ns - j0 == -30000000000LL);
		w.resume();
	});

	run("a jump_handle may outlive its clock (members die in reverse order)", [&] {
		int calls = 0;
		{
			struct holder {
				shmclock::jump_handle h; // destroyed after c
				shmclock::clock c;
			} x{ {}, shmclock::clock{ name } };
			x.h = x.c.on_jump([&](const shmclock_jump_t &, bool) { calls++; });
			w.set_time(sim_clock::time_point(20s));
			(void)x.c.now();
		} // before: ~clock unmapped and freed, then ~jump_handle used it
		CHECK(calls == 2);
		shmclock::jump_handle outlived;
		{
			shmclock::clock tmp{ name };
			outlived = tmp.on_jump([&](const shmclock_jump_t &, bool) { calls++; });
		}
		outlived.reset();
		CHECK(calls == 2);
	});

	run("a rate may outlive its clock", [&] {
		std::unique_ptr<shmclock::rate> r;
		{
			shmclock::clock tmp{ name };
			r = std::make_unique<shmclock::rate>(tmp, 5ms);
		}
		// Its clock's handle is gone: the rate still reads and sleeps
		// (the periods missed are the machine's, a count, not garbage).
		CHECK(r->sleep() < 1000);
		CHECK(r->sleep() < 1000);
	});

	run("a one-shot callback drops the last reference to its clock on the watcher", [&] {
		// The jump_handle holds the last share; its reset() inside the
		// callback closed the clock on its own watcher (a use-after-free
		// in run_callbacks) and destroyed the running std::function.
		std::atomic<int> calls{ 0 };
		std::atomic<bool> ready{ false }; // `once` is assigned (TSan cannot see the seqlock)
		std::unique_ptr<shmclock::jump_handle> once(new shmclock::jump_handle);
		{
			shmclock::clock wc{ name, SHMCLOCK_OPEN_WATCH_JUMPS };
			*once = wc.on_jump([&](const shmclock_jump_t &, bool before) {
				if (!ready.load(std::memory_order_acquire))
					return;
				if (before)
					once->reset();
				calls++; // after the reset: the test may destroy `once`
			});
			ready.store(true, std::memory_order_release);
		}
		w.set_time(w.now() + 1s);
		for (int i = 0; i < 200 && calls == 0; i++)
			std::this_thread::sleep_for(5ms);
		std::this_thread::sleep_for(100ms); // the close on a thread of its own
		CHECK(calls == 1); // before only: unregistered inside it
	});

	run("saturated_ns at the boundaries", [&] {
		using shmclock::detail::saturated_ns;
		// Just under 2^63 ns in float seconds: in range (duration_cast
		// rounded it up to 2^63 and wrapped to INT64_MIN).
		CHECK(saturated_ns(std::chrono::duration<float>(9223371776.0f)) ==
		      static_cast<std::int64_t>(static_cast<long double>(9223371776.0f) * 1e9L));
		CHECK(saturated_ns(std::chrono::duration<float>(9223371776.0f)) > 9200000000000000000LL);
		CHECK(saturated_ns(std::chrono::duration<float>(1e19f)) == INT64_MAX);
		CHECK(saturated_ns(std::chrono::duration<double>(-1e300)) == INT64_MIN);
		CHECK(saturated_ns(std::chrono::duration<long long, std::ratio<1, 3>>(10000000000LL)) ==
		      3333333333333333333LL);
		using frames = std::chrono::duration<long long, std::ratio<1, 60>>;
		// 100 years of 60 Hz frames: duration_cast multiplied by 10^9
		// before dividing by 60 and overflowed.
		CHECK(saturated_ns(frames(60LL * 3600 * 24 * 365 * 100)) == 3153600000000000000LL);
		CHECK(saturated_ns(frames(60LL * 3600 * 24 * 365 * 300)) == INT64_MAX);
		CHECK(saturated_ns(frames(90)) == 1500000000LL);
		CHECK(saturated_ns(std::chrono::duration<unsigned long long>(~0ULL)) == INT64_MAX);
		CHECK(saturated_ns(std::chrono::nanoseconds::max()) == INT64_MAX);
		CHECK(saturated_ns(std::chrono::nanoseconds::min()) == INT64_MIN);
		CHECK(saturated_ns(std::chrono::duration<double>(1.5)) == 1500000000LL);
	});

	run("a moved-from clock, writer and rate throw std::logic_error", [&] {
		shmclock::clock a{ name };
		shmclock::clock b = std::move(a);
		int thrown = 0;
		auto expect_logic = [&](auto fn) {
			try {
				fn();
			} catch (const std::logic_error &e) {
				thrown++;
				CHECK(std::string(e.what()).find("moved-from") != std::string::npos);
			}
		};
		expect_logic([&] { (void)a.now(); }); // before: a null dereference
		expect_logic([&] { (void)a.now_ns(); });
		expect_logic([&] { (void)a.now_unix_ns(); });
		expect_logic([&] { (void)a.info(); });
		expect_logic([&] { a.sleep_for(1ms); });
		expect_logic([&] { (void)a.on_jump([](const shmclock_jump_t &, bool) {}); });
		expect_logic([&] { (void)a.name(); });
		CHECK(thrown == 7);
		CHECK(b.now() >= sim_clock::time_point(0s));
		shmclock::rate r1{ b, 1ms };
		shmclock::rate r2 = std::move(r1);
		expect_logic([&] { r1.sleep(); });
		CHECK(r2.sleep() == 0);
		CHECK(thrown == 8);
		shmclock::writer w2 = std::move(w);
		expect_logic([&] { w.pause(); });
		CHECK(thrown == 9);
		w = std::move(w2);
		w.resume();
	});

	run("durations saturate: max() and 300 years sleep for ever, negative returns at once", [&] {
		// As std::this_thread::sleep_for. Before: duration_cast overflowed
		// and the library refused the result (EINVAL: 'a clock name is ...').
		auto t0 = steady::now();
		c.sleep_for(-5ms);
		c.sleep_for(std::chrono::nanoseconds::min());
		c.sleep_until(c.now() - 1s);
		CHECK(real_ms(t0) < 10000); // at once, however loaded the machine
		std::atomic<int> outcome[4];
		std::vector<std::thread> sleepers;
		for (int i = 0; i < 4; i++) {
			outcome[i] = 0;
			sleepers.emplace_back([&, i] {
				try {
					switch (i) {
					case 0: c.sleep_for(std::chrono::seconds::max()); break;
					case 1: c.sleep_for(std::chrono::hours(24 * 365 * 300)); break;
					case 2: c.sleep_until(sim_clock::time_point::max()); break;
					case 3: c.sleep_for(std::chrono::duration<double>(1e300)); break;
					}
					outcome[i] = 1; // returned: wrong
				} catch (const std::system_error &e) {
					outcome[i] = e.code() == std::errc::operation_canceled ? 2 : 3;
					if (outcome[i] == 3)
						std::printf("# sleeper %d: %s\n", i, e.what());
				}
			});
		}
		std::this_thread::sleep_for(200ms);
		for (int i = 0; i < 4; i++)
			CHECK(outcome[i] == 0); // still asleep (or not started yet)
		// A cancel reaches only sleeps already begun: cancel until every
		// sleeper has seen one, however late a loaded machine started it.
		for (int k = 0; k < 400; k++) {
			bool all = true;
			for (int i = 0; i < 4; i++)
				all = all && outcome[i] != 0;
			if (all)
				break;
			shmclock_cancel_sleeps(c.native_handle());
			std::this_thread::sleep_for(50ms);
		}
		for (auto &t : sleepers)
			t.join();
		for (int i = 0; i < 4; i++)
			CHECK(outcome[i] == 2); // woken by the cancel, not refused
		CHECK(!c.wait_change(-1s));
		CHECK(shmclock::detail::saturated_ns(std::chrono::seconds::max()) == INT64_MAX);
		CHECK(shmclock::detail::saturated_ns(std::chrono::seconds::min()) == INT64_MIN);
		CHECK(shmclock::detail::saturated_ns(std::chrono::milliseconds(3)) == 3000000);
	});

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	// gcc 12's ASan and TSan runtimes do not hold their own locks across
	// fork(): a child of a threaded process can hang in them. The plain
	// build runs this case.
	tests++;
	std::printf("ok %d - a forked child goes on # SKIP the sanitizer runtime does not survive fork() among threads\n", tests);
	if (false)
#endif
	run("a forked child goes on with the parent's clock and callbacks", [&] {
		shmclock::clock wc{ name, SHMCLOCK_OPEN_WATCH_JUMPS };
		std::atomic<int> calls{ 0 };
		auto h = wc.on_jump([&](const shmclock_jump_t &, bool) { calls++; });
		pid_t pid = fork();
		if (pid == 0) {
			alarm(20);
			(void)wc.now(); // the first read starts the watcher again
			// The parent drives the jump; the child's watcher delivers it.
			for (int i = 0; i < 1000 && calls < 2; i++)
				std::this_thread::sleep_for(5ms);
			wc.sleep_for(10ms);
			_exit(calls >= 2 ? 0 : 3);
		}
		std::this_thread::sleep_for(50ms);
		w.set_time(sim_clock::time_point(500s));
		int status = 0;
		CHECK(waitpid(pid, &status, 0) == pid);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	});

	run("200 threads read, sleep and register while clocks come and go", [&] {
		std::atomic<bool> stop{ false };
		std::atomic<long> reads{ 0 };
		std::vector<std::thread> ts;
		for (int i = 0; i < 200; i++) {
			ts.emplace_back([&, i] {
				shmclock::clock mine{ name };
				while (!stop) {
					(void)mine.now();
					reads++;
					if (i % 10 == 0) {
						auto jh = mine.on_jump([](const shmclock_jump_t &, bool) {});
						shmclock::clock moved = std::move(mine);
						mine = std::move(moved);
					}
					if (i % 7 == 0)
						mine.sleep_for(1ms);
				}
			});
		}
		for (int k = 0; k < 10; k++) {
			std::this_thread::sleep_for(20ms);
			w.set_time(w.now() + 1s);
		}
		stop = true;
		for (auto &t : ts)
			t.join();
		CHECK(reads > 200);
	});

	// Lockstep: a host in this process (what shmclockd --lockstep does:
	// accept joins, advance to the smallest grant) and participants on
	// threads of their own.
	run("lockstep participants hold the clock; errors say why", [&] {
		const std::string ls = name + "-ls";
		shmclock::writer lw{ ls };
		shmclock_lockstep_host_t *host = nullptr;
		CHECK(shmclock_writer_set_stepped(lw.native_handle(), true) == 0);
		lw.advance(sim_clock::time_point(0ns));
		CHECK(shmclock_lockstep_host_create(lw.native_handle(), ls.c_str(), 0600, (gid_t)-1,
						    &host) == 0);
		if (!host)
			return;
		std::atomic<bool> stop{ false };
		std::thread h([&] {
			std::int64_t now = 0;
			while (!stop) {
				std::uint32_t tok = shmclock_lockstep_host_token(host);
				std::int64_t min = 0;
				unsigned n = 0;
				shmclock_lockstep_host_scan(host, now, nullptr, nullptr, &min, &n);
				// Two members at least, as Participants 2.
				if (n >= 2 && min != INT64_MAX && min > now) {
					lw.advance(sim_clock::time_point(sim_clock::duration(min)));
					now = min;
				}
				shmclock_lockstep_host_committed(host, now);
				shmclock_lockstep_host_wait(host, tok, nullptr, 0,
							    shmclock_steady_now().ns + 5000000);
			}
		});
		// Each records a grant before it makes it: when one returns
		// from advance(t), every other that is still a member has
		// granted t or more, and the clock reads t or later.
		std::atomic<std::int64_t> granted[2] = { { 0 }, { 0 } };
		std::atomic<int> bad{ 0 }, done{ 0 };
		auto part = [&](int i, std::chrono::milliseconds period) {
			shmclock::clock rc{ ls };
			shmclock::lockstep p{ i ? "b" : "a", ls };
			for (auto t = p.joined_at() + period; t <= sim_clock::time_point(60ms); t += period) {
				granted[i] = t.time_since_epoch().count();
				p.advance(t);
				if (rc.now() < t)
					bad++;
				if (granted[1 - i] < t.time_since_epoch().count())
					bad++;
			}
			granted[i] = INT64_MAX; // holds nothing from here
			done++;
		};
		std::thread a(part, 0, 1ms), b(part, 1, 3ms);
		a.join();
		b.join();
		CHECK(bad == 0 && done == 2);
		CHECK(shmclock::clock{ ls }.now() >= sim_clock::time_point(60ms));

		shmclock::lockstep x{ "x", ls };
		int err = 0;
		try {
			shmclock::lockstep twin{ "x", ls };
		} catch (const std::system_error &e) {
			err = e.code().value();
		}
		CHECK(err == EEXIST);
		shmclock::lockstep y{ "y", ls };
		auto t0 = y.joined_at();
		x.grant(t0 + 5ms);
		try {
			err = 0;
			x.grant(t0 + 4ms); // behind its last grant
		} catch (const std::system_error &e) {
			err = e.code().value();
		}
		CHECK(err == EINVAL);
		CHECK(!x.advance(t0 + 5ms, 50ms)); // y holds the clock at t0
		CHECK(y.advance(t0 + 5ms, 10s));
		CHECK(x.advance(t0 + 5ms, 10s));
		CHECK(x.max_ahead() > 0ns);
		shmclock::lockstep moved = std::move(x);
		CHECK(!x.joined() && moved.joined());
		moved.leave();
		moved.leave(); // idempotent
		try {
			err = 0;
			moved.grant(t0 + 6ms);
		} catch (const std::logic_error &) {
			err = -1;
		}
		CHECK(err == -1);
		try {
			err = 0;
			shmclock::lockstep none{ "z", name }; // a clock not in lockstep
		} catch (const std::system_error &e) {
			err = e.code().value();
		}
		CHECK(err == EOPNOTSUPP);
		y.leave();
		stop = true;
		h.join();
		shmclock_lockstep_host_destroy(host);
		shmclock_unlink(ls.c_str());
	});

	shmclock_unlink(name.c_str());
	return failures ? 1 : 0;
}
