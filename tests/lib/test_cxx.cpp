// SPDX-License-Identifier: MIT
//
// <shmclock/shmclock.hpp> from C++17, compiled with -Wall -Wextra -Werror
// (meson test cxx). A writer in this process drives the clock; TAP output.
#include <shmclock/shmclock.hpp>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

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
	std::printf("1..10\n");

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
		shmclock::rate r{ c, 20ms };
		CHECK(r.sleep() == 0);
		auto prev = c.now();
		for (int i = 0; i < 3; i++) {
			CHECK(r.sleep() == 0);
			CHECK(c.now() - prev >= 10ms);
			prev = c.now();
		}
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

	shmclock_unlink(name.c_str());
	return failures ? 1 : 0;
}
