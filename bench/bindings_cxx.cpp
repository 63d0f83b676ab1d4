// SPDX-License-Identifier: MIT
//
// shmclock-bench-cxx: the cost of shmclock::sim_clock::now() against
// std::chrono::steady_clock::now(), measured in the same process (run by
// `shmclock-bench bindings`). Prints one JSON object: per-read ns of each
// contender, timed in batches, the contenders taking turns batch by batch.
#include <shmclock/shmclock.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <unistd.h>

using steady = std::chrono::steady_clock;

template <class F>
static double batch_ns(F read, int batch)
{
	auto t0 = steady::now();
	for (int i = 0; i < batch; i++)
		read();
	return std::chrono::duration<double, std::nano>(steady::now() - t0).count() / batch;
}

static double pct(std::vector<double> &v, double p)
{
	std::sort(v.begin(), v.end());
	return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

int main(int argc, char **argv)
{
	long batches = argc > 1 ? std::atol(argv[1]) : 200000;
	const int batch = 50;
	std::string name = "bench-cxx-" + std::to_string(getpid());
	std::vector<double> base, sim;
	volatile long long sink = 0;

	setenv("SHMCLOCK_NAME", name.c_str(), 1);
	try {
		shmclock::writer w{ name };
		w.set_time(shmclock::sim_clock::time_point());
		for (int i = 0; i < 1000; i++)
			sink = sink + shmclock::sim_clock::now().time_since_epoch().count();
		for (long b = 0; b < batches; b++) {
			base.push_back(batch_ns([&] { sink = sink + steady::now().time_since_epoch().count(); }, batch));
			sim.push_back(batch_ns([&] { sink = sink + shmclock::sim_clock::now().time_since_epoch().count(); },
					       batch));
		}
	} catch (const std::exception &e) {
		std::fprintf(stderr, "shmclock-bench-cxx: %s\n", e.what());
		shmclock_unlink(name.c_str());
		return 1;
	}
	shmclock_unlink(name.c_str());
	std::printf("{\"language\":\"C++\",\"contenders\":["
		    "{\"name\":\"std::chrono::steady_clock::now()\",\"p50\":%.3f,\"p99\":%.3f,\"p999\":%.3f,\"max\":%.3f},"
		    "{\"name\":\"shmclock::sim_clock::now()\",\"p50\":%.3f,\"p99\":%.3f,\"p999\":%.3f,\"max\":%.3f}],"
		    "\"goal\":1.15}\n",
		    pct(base, 0.5), pct(base, 0.99), pct(base, 0.999), pct(base, 1),
		    pct(sim, 0.5), pct(sim, 0.99), pct(sim, 0.999), pct(sim, 1));
	return 0;
}
