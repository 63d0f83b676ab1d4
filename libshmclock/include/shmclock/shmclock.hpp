// SPDX-License-Identifier: MIT
//
// <shmclock/shmclock.hpp> — shmclock for C++17, header-only over libshmclock.
//
//   shmclock::clock c{"sim"};                  // or $SHMCLOCK_NAME, else "default"
//   shmclock::lockstep p{"lidar", "sim"};      // a participant: p.advance(t) holds the clock
//   auto t = c.now();                          // shmclock::sim_clock::time_point
//   c.sleep_for(std::chrono::milliseconds(10)); // 10 ms of simulated time
//
//   auto t = shmclock::sim_clock::now();       // a process-wide clock, opened lazily
//   shmclock::sleep_until(t + 100ms);          // follows pause and scale
//
// Errors are std::system_error with std::generic_category() and the errno
// (ENOENT no such clock, EPERM untrusted owner, EBUSY another writer, ...);
// what() carries the library's message. A call on a moved-from clock,
// writer or rate throws std::logic_error.
//
// Lifetimes: a jump_handle or a rate keeps the mapping it needs alive (a
// shared handle), so it may outlive the clock it came from; its callbacks
// then go on until it is reset. Durations saturate as the standard
// library's sleeps do: a negative one returns at once, one beyond what
// nanoseconds hold (seconds::max(), 300 years) sleeps for ever.
//
// fork(): a child goes on with the clocks its parent opened (sleeps, waits
// and jump callbacks, whose watcher the library starts again there).
//
// Why sleep_until / sleep_for / wait_until of our own: std::this_thread::
// sleep_until(sim_clock::time_point) converts the wait into real time once,
// at the start, so it oversleeps when the clock runs faster than real time,
// undersleeps when slower, and ignores a pause. Ours re-plan on every change
// of the clock (the writer's futex), without polling.
#ifndef SHMCLOCK_SHMCLOCK_HPP
#define SHMCLOCK_SHMCLOCK_HPP

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <ratio>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>
#include <system_error>
#include <utility>

#include <shmclock/lockstep.h>
#include <shmclock/shmclock.h>
#include <shmclock/time.h>
#include <shmclock/writer.h>

namespace shmclock {

namespace detail {
// A duration as int64 ns, saturated at the ends instead of overflowing
// (duration_cast<nanoseconds>(seconds::max()) is undefined); NaN is 0.
// The range is checked on the exact value (long double holds every int64);
// duration_cast is used only where it cannot overflow: an integer count
// times a whole number of ns. Otherwise (floating counts, periods such as
// 1/60 s, which duration_cast multiplies before it divides) the value is
// converted from the checked long double.
template <class Rep, class Period>
constexpr std::int64_t saturated_ns(std::chrono::duration<Rep, Period> d)
{
	const long double v = std::chrono::duration<long double, std::nano>(d).count();

	if (!(v == v))
		return 0;
	if (v >= 0x1p63L)
		return INT64_MAX;
	if (v <= -0x1p63L)
		return INT64_MIN;
	if constexpr (std::is_floating_point<Rep>::value ||
		      std::ratio_divide<Period, std::nano>::den != 1)
		return static_cast<std::int64_t>(v);
	else
		return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
}

// Jump callbacks are run by jump_handle's trampoline; this counts them on
// this thread. There, what must not happen is put off (see handle_box).
inline int &callback_depth() noexcept
{
	static thread_local int depth = 0;
	return depth;
}

// The reader's handle, shared by a clock and what it hands out (jump
// handles, rates). Closed when the last of them goes: from inside a
// callback on a thread of its own (the watcher running the callback cannot
// wait for itself; the close waits for the callback to return). Callbacks
// unregistered inside a callback may still be running on another thread
// (the library does not wait there): they are kept until the handle closes.
struct handle_box {
	shmclock_t *c = nullptr;
	std::mutex m;
	std::vector<std::shared_ptr<void>> graveyard;

	handle_box() = default;
	handle_box(const handle_box &) = delete;
	handle_box &operator=(const handle_box &) = delete;
	~handle_box()
	{
		std::vector<std::shared_ptr<void>> g = std::move(graveyard);
		shmclock_t *h = c;

		if (callback_depth() > 0) {
			try {
				std::thread([h, g = std::move(g)]() mutable {
					shmclock_close(h);
					g.clear();
				}).detach();
			} catch (...) {
				// No thread: left open (a leak, never a crash).
			}
			return;
		}
		shmclock_close(h);
	}
};
using shared_handle = std::shared_ptr<handle_box>;

[[noreturn]] inline void throw_moved(const char *what)
{
	throw std::logic_error(std::string("shmclock: ") + what + " of a moved-from object");
}
} // namespace detail

// The error for -errno r from the library, as a std::system_error.
[[noreturn]] inline void throw_error(int r, const std::string &what)
{
	throw std::system_error(-r, std::generic_category(), what + ": " + shmclock_strerror(r));
}

// $SHMCLOCK_NAME, else "default": the name every shmclock program uses.
inline std::string default_name()
{
	const char *n = std::getenv("SHMCLOCK_NAME");
	return n && *n ? n : "default";
}

class clock;

// Simulated time as a std::chrono clock. Not steady: it pauses, and jumps
// when the writer sets it. now() reads a process-wide clock (default_name(),
// opened on first use; a std::system_error if it cannot be).
struct sim_clock {
	using rep = std::int64_t;
	using period = std::nano;
	using duration = std::chrono::nanoseconds;
	using time_point = std::chrono::time_point<sim_clock>;
	static constexpr bool is_steady = false;

	static time_point now();
	// The process-wide clock now() reads.
	static clock &instance();
};

// A registered jump callback; destroying (or reset()) unregisters it. Once
// that returns, the callback is not running and will not run again.
class jump_handle {
public:
	using callback = std::function<void(const shmclock_jump_t &, bool before)>;

	jump_handle() = default;
	jump_handle(const jump_handle &) = delete;
	jump_handle &operator=(const jump_handle &) = delete;
	jump_handle(jump_handle &&o) noexcept
		: c_(std::move(o.c_)), id_(o.id_), fn_(std::move(o.fn_))
	{
	}
	jump_handle &operator=(jump_handle &&o) noexcept
	{
		if (this != &o) {
			reset();
			c_ = std::move(o.c_);
			id_ = o.id_;
			fn_ = std::move(o.fn_);
		}
		return *this;
	}
	~jump_handle() { reset(); }

	// Unregisters; the clock's mapping goes once nothing else holds it.
	// From inside a callback too (its own or another's).
	void reset() noexcept
	{
		if (c_) {
			shmclock_jump_callback_remove(c_->c, id_);
			if (fn_ && detail::callback_depth() > 0) {
				// It may be running: kept until the handle closes.
				try {
					std::lock_guard<std::mutex> g(c_->m);
					c_->graveyard.emplace_back(std::shared_ptr<callback>(std::move(fn_)));
				} catch (...) {
					(void)fn_.release(); // kept for ever rather than freed while it runs
				}
			}
		}
		c_.reset();
		fn_.reset();
	}

private:
	friend class clock;
	static void trampoline(const shmclock_jump_t *j, bool before, void *user) noexcept
	{
		// An exception must not unwind through C: a callback that
		// throws has its exception dropped.
		detail::callback_depth()++;
		try {
			(*static_cast<callback *>(user))(*j, before);
		} catch (...) {
		}
		detail::callback_depth()--;
	}

	detail::shared_handle c_;
	std::uint64_t id_ = 0;
	std::unique_ptr<callback> fn_;
};

// A clock, read-only (RAII over shmclock_t; movable, not copyable).
class clock {
public:
	explicit clock(const std::string &name = default_name(), unsigned flags = 0)
	{
		auto box = std::make_shared<detail::handle_box>();
		int r = shmclock_open_ex(name.c_str(), flags, &box->c);
		if (r)
			throw_error(r, "shmclock: clock '" + name + "'");
		raw_ = box->c;
		c_ = std::move(box);
	}
	clock(const clock &) = delete;
	clock &operator=(const clock &) = delete;
	// A moved-from clock throws std::logic_error from every call.
	clock(clock &&o) noexcept : c_(std::move(o.c_)), raw_(std::exchange(o.raw_, nullptr)) {}
	clock &operator=(clock &&o) noexcept
	{
		if (this != &o) {
			c_ = std::move(o.c_);
			raw_ = std::exchange(o.raw_, nullptr);
		}
		return *this;
	}
	~clock() = default;

	// Simulation time. A dead writer is not an error here: the time is
	// computed from the last committed state (info().writer_alive says so).
	sim_clock::time_point now() const { return sim_clock::time_point(sim_clock::duration(now_ns())); }
	// The hot path: a direct call (shmclock-bench bindings measures it).
	std::int64_t now_ns() const
	{
		std::int64_t t;
		int r = shmclock_now(h("now"), &t);
		if (__builtin_expect(r != 0, 0) && r != -ESTALE)
			throw_error(r, "shmclock: now");
		return t;
	}
	// The simulated world's UNIX time, ns (UnixTimeAtZero + now).
	std::int64_t now_unix_ns() const { return read(shmclock_now_unix, "shmclock: now_unix"); }
	// The jump-free simulated time, ns (shmclock_now_monotonic): never
	// moved by a jump, never decreasing.
	std::int64_t now_monotonic_ns() const
	{
		return read(shmclock_now_monotonic, "shmclock: now_monotonic");
	}
	shmclock_info_t info() const
	{
		shmclock_info_t i;
		int r = shmclock_info(h("info"), &i);
		if (r)
			throw_error(r, "shmclock: info");
		return i;
	}

	// Sleep in simulated time, across pause, resume, scale changes and
	// steps, without polling. sleep_for counts a backward jump as no time
	// elapsed (the library's rule). As std::this_thread's: a time in the
	// past or a duration <= 0 returns at once, time_point::max() or a
	// duration beyond nanoseconds::max() sleeps for ever.
	template <class Duration>
	void sleep_until(std::chrono::time_point<sim_clock, Duration> t) const
	{
		auto ns = detail::saturated_ns(t.time_since_epoch());
		int r = shmclock_sleep_until(h("sleep_until"), shmclock_sim_time(ns), 0);
		if (r)
			throw_error(r, "shmclock: sleep_until");
	}
	template <class Rep, class Period>
	void sleep_for(std::chrono::duration<Rep, Period> d) const
	{
		auto ns = detail::saturated_ns(d);
		shmclock_t *c = h("sleep_for");
		if (ns <= 0)
			return;
		int r = shmclock_sleep_for_ex(c, shmclock_nsec(ns), 0, SHMCLOCK_DURATION_INFINITE, nullptr);
		if (r)
			throw_error(r, "shmclock: sleep_for");
	}

	// Wait (real time, at most timeout) for the next change of the clock.
	template <class Rep, class Period>
	bool wait_change(std::chrono::duration<Rep, Period> timeout) const
	{
		auto ns = detail::saturated_ns(timeout);
		shmclock_t *c = h("wait_change");
		std::uint32_t tok = shmclock_change_token(c);
		int r = shmclock_wait_change(c, tok, shmclock_nsec(ns < 0 ? 0 : ns));
		if (r && r != -ETIMEDOUT)
			throw_error(r, "shmclock: wait_change");
		return r == 0;
	}

	// std::condition_variable::wait_until in simulated time: returns
	// std::cv_status::timeout once the clock reaches t, no_timeout when
	// notified (spuriously too, as the standard's). The wait is planned in
	// real time from the clock's current rate and re-planned at least every
	// 20 ms, so a pause, resume or scale change is followed within 20 ms.
	std::cv_status wait_until(std::condition_variable &cv, std::unique_lock<std::mutex> &lock,
				  sim_clock::time_point t) const
	{
		using namespace std::chrono;
		constexpr auto slice = milliseconds(20);

		for (;;) {
			if (now() >= t)
				return std::cv_status::timeout;
			shmclock_steady_time_t at;
			auto limit = steady_clock::now() + slice;
			if (shmclock_sim_to_steady(h("wait_until"), shmclock_sim_time(t.time_since_epoch().count()), &at) == 0) {
				auto due = steady_clock::time_point(nanoseconds(at.ns));
				if (due < limit)
					limit = due;
			}
			if (cv.wait_until(lock, limit) == std::cv_status::no_timeout)
				return std::cv_status::no_timeout;
		}
	}
	template <class Predicate>
	bool wait_until(std::condition_variable &cv, std::unique_lock<std::mutex> &lock,
			sim_clock::time_point t, Predicate pred) const
	{
		while (!pred())
			if (wait_until(cv, lock, t) == std::cv_status::timeout)
				return pred();
		return true;
	}

	// Call fn(jump, before) around jumps: before == true first, before the
	// process sees the new time, then false. By default every jump.
	jump_handle on_jump(jump_handle::callback fn,
			    shmclock_jump_threshold_t threshold = { true, 1, 1 })
	{
		jump_handle jh;
		jh.fn_ = std::make_unique<jump_handle::callback>(std::move(fn));
		int r = shmclock_jump_callback_add(h("on_jump"), threshold, &jump_handle::trampoline,
						   jh.fn_.get(), &jh.id_);
		if (r)
			throw_error(r, "shmclock: on_jump");
		jh.c_ = c_;
		return jh;
	}

	// nullptr for a moved-from clock.
	shmclock_t *native_handle() const noexcept { return raw_; }
	std::string name() const { return shmclock_name(h("name")); }

private:
	friend class rate;
	// The handle, or std::logic_error for a moved-from clock (one
	// predictable branch on the read path).
	shmclock_t *h(const char *what) const
	{
		if (__builtin_expect(raw_ == nullptr, 0))
			detail::throw_moved(what);
		return raw_;
	}
	// One of the library's reads; a dead writer's value is still a value.
	std::int64_t read(int (*fn)(shmclock_t *, std::int64_t *), const char *what) const
	{
		std::int64_t t;
		int r = fn(h(what), &t);
		if (r && r != -ESTALE)
			throw_error(r, what);
		return t;
	}
	detail::shared_handle c_;
	shmclock_t *raw_ = nullptr; // c_->c, read without the shared_ptr's indirection
};

inline clock &sim_clock::instance()
{
	static clock c{ default_name() };
	return c;
}

inline sim_clock::time_point sim_clock::now()
{
	return instance().now();
}

// The process-wide clock's sleeps and waits (sim_clock::instance()).
template <class Duration>
inline void sleep_until(std::chrono::time_point<sim_clock, Duration> t)
{
	sim_clock::instance().sleep_until(t);
}
template <class Rep, class Period>
inline void sleep_for(std::chrono::duration<Rep, Period> d)
{
	sim_clock::instance().sleep_for(d);
}
inline std::cv_status wait_until(std::condition_variable &cv, std::unique_lock<std::mutex> &lock,
				 sim_clock::time_point t)
{
	return sim_clock::instance().wait_until(cv, lock, t);
}
template <class Predicate>
inline bool wait_until(std::condition_variable &cv, std::unique_lock<std::mutex> &lock,
		       sim_clock::time_point t, Predicate pred)
{
	return sim_clock::instance().wait_until(cv, lock, t, std::move(pred));
}

// A fixed simulated period (rclcpp's Rate): sleep() returns at each
// boundary and says how many it missed; a backward jump starts over.
class rate {
public:
	// Keeps the clock's mapping alive: it may outlive @c.
	template <class Rep, class Period>
	rate(const clock &c, std::chrono::duration<Rep, Period> period) : c_(c.c_)
	{
		auto ns = detail::saturated_ns(period);
		int r = shmclock_rate_init(&r_, c.h("rate"), shmclock_nsec(ns));
		if (r)
			throw_error(r, "shmclock: rate");
	}
	std::uint64_t sleep()
	{
		std::uint64_t missed = 0;
		if (!c_)
			detail::throw_moved("rate::sleep");
		int r = shmclock_rate_sleep(&r_, &missed);
		if (r)
			throw_error(r, "shmclock: rate::sleep");
		return missed;
	}
	void reset()
	{
		if (!c_)
			detail::throw_moved("rate::reset");
		shmclock_rate_reset(&r_);
	}

private:
	detail::shared_handle c_;
	shmclock_rate_t r_{};
};

// The clock's writer (RAII over shmclock_writer_t; movable).
class writer {
public:
	explicit writer(const std::string &name = default_name(), unsigned mode = 0644)
	{
		int r = shmclock_writer_open_mode(name.c_str(), mode, &w_);
		if (r)
			throw_error(r, "shmclock: writer '" + name + "'");
	}
	writer(const writer &) = delete;
	writer &operator=(const writer &) = delete;
	writer(writer &&o) noexcept : w_(std::exchange(o.w_, nullptr)) {}
	writer &operator=(writer &&o) noexcept
	{
		if (this != &o) {
			shmclock_writer_close(w_);
			w_ = std::exchange(o.w_, nullptr);
		}
		return *this;
	}
	~writer() { shmclock_writer_close(w_); }

	void set_time(sim_clock::time_point t) { check(shmclock_writer_set_time(h("set_time"), t.time_since_epoch().count()), "set_time"); }
	void advance(sim_clock::time_point t) { check(shmclock_writer_advance(h("advance"), t.time_since_epoch().count()), "advance"); }
	template <class Rep, class Period>
	void step(std::chrono::duration<Rep, Period> d)
	{
		check(shmclock_writer_step(h("step"), detail::saturated_ns(d)), "step");
	}
	void set_scale(double s) { check(shmclock_writer_set_scale(h("set_scale"), s), "set_scale"); }
	void pause() { check(shmclock_writer_pause(h("pause")), "pause"); }
	void resume() { check(shmclock_writer_resume(h("resume")), "resume"); }
	void set_unix_at_zero(std::int64_t unix_ns) { check(shmclock_writer_set_unix_at_zero(h("set_unix_at_zero"), &unix_ns), "set_unix_at_zero"); }
	sim_clock::time_point now() const
	{
		std::int64_t t;
		check(shmclock_writer_now(h("now"), &t), "now");
		return sim_clock::time_point(sim_clock::duration(t));
	}
	shmclock_info_t info() const
	{
		shmclock_info_t i;
		shmclock_writer_info(h("info"), &i);
		return i;
	}
	// nullptr for a moved-from writer.
	shmclock_writer_t *native_handle() const noexcept { return w_; }

private:
	shmclock_writer_t *h(const char *what) const
	{
		if (!w_)
			detail::throw_moved((std::string("writer ") + what).c_str());
		return w_;
	}
	static void check(int r, const char *what)
	{
		if (r)
			throw_error(r, std::string("shmclock: writer ") + what);
	}
	shmclock_writer_t *w_ = nullptr;
};

// A participant of a clock in lockstep (<shmclock/lockstep.h>): it holds
// the clock until it grants. Joined by the constructor, left by the
// destructor (or leave()); the library's participant belongs to the thread
// that joined, so make, call and destroy it there. Errors are
// std::system_error (ENOENT no such clock, EOPNOTSUPP not in lockstep
// mode, EEXIST the name is taken, ECANCELED evicted, ESTALE the writer went
// away; EINVAL a grant behind the last one or past the horizon), with
// lockstep's own message.
//
//   shmclock::lockstep p{"lidar", "sim"};
//   for (auto t = p.joined_at() + 10ms;; t += 10ms) {
//           p.advance(t);   // the clock is at t: everyone before t is done
//           scan(t);        // then grant the next step
//   }
class lockstep {
public:
	explicit lockstep(const std::string &who, const std::string &name = default_name())
	{
		int r = shmclock_lockstep_join(name.c_str(), who.c_str(), &p_);
		if (r)
			throw_lockstep(r, nullptr, "join '" + who + "' to clock '" + name + "'");
	}
	lockstep(const lockstep &) = delete;
	lockstep &operator=(const lockstep &) = delete;
	lockstep(lockstep &&o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
	lockstep &operator=(lockstep &&o) noexcept
	{
		if (this != &o) {
			shmclock_lockstep_leave(p_);
			p_ = std::exchange(o.p_, nullptr);
		}
		return *this;
	}
	~lockstep() { shmclock_lockstep_leave(p_); }

	// Everything before t is done: the clock may move up to t.
	void grant(sim_clock::time_point t)
	{
		int r = shmclock_lockstep_grant(h("grant"), t.time_since_epoch().count());
		if (r)
			throw_lockstep(r, p_, "grant");
	}
	// Grants t and waits until the clock reaches it.
	void advance(sim_clock::time_point t)
	{
		int r = shmclock_lockstep_advance(h("advance"), t.time_since_epoch().count(),
						  SHMCLOCK_DURATION_INFINITE);
		if (r)
			throw_lockstep(r, p_, "advance");
	}
	// ... at most @timeout of real time: false when it passed first (the
	// grant stands).
	template <class Rep, class Period>
	bool advance(sim_clock::time_point t, std::chrono::duration<Rep, Period> timeout)
	{
		std::int64_t ns = detail::saturated_ns(timeout);
		int r = shmclock_lockstep_advance(h("advance"), t.time_since_epoch().count(),
						  ns == INT64_MAX ? SHMCLOCK_DURATION_INFINITE
								  : shmclock_nsec(ns < 0 ? 0 : ns));
		if (r == -ETIMEDOUT)
			return false;
		if (r)
			throw_lockstep(r, p_, "advance");
		return true;
	}
	// The clock's time when this participant was accepted: its first grant
	// comes after it.
	sim_clock::time_point joined_at() const
	{
		return sim_clock::time_point(
			sim_clock::duration(shmclock_lockstep_joined_at(h("joined_at"))));
	}
	// How far past the clock's time a grant may go (MaxGrantAhead).
	std::chrono::nanoseconds max_ahead() const
	{
		return std::chrono::nanoseconds(shmclock_lockstep_max_ahead(h("max_ahead")));
	}
	// No longer hold the clock (then as moved-from). Idempotent.
	void leave() noexcept { shmclock_lockstep_leave(std::exchange(p_, nullptr)); }
	bool joined() const noexcept { return p_ != nullptr; }
	// nullptr once left or moved from.
	shmclock_lockstep_t *native_handle() const noexcept { return p_; }

private:
	shmclock_lockstep_t *h(const char *what) const
	{
		if (!p_)
			throw std::logic_error(std::string("shmclock: lockstep ") + what +
					       " after leave() or a move");
		return p_;
	}
	[[noreturn]] static void throw_lockstep(int r, const shmclock_lockstep_t *p,
						const std::string &what)
	{
		throw std::system_error(-r, std::generic_category(),
					"shmclock: lockstep " + what + ": " +
						shmclock_lockstep_strerror(p, r));
	}
	shmclock_lockstep_t *p_ = nullptr;
};

} // namespace shmclock

#endif
