// SPDX-License-Identifier: MIT
// A C++ reader for the containers test (containers_e2e.py): prints the
// simulation time of clock argv[1] in ns, or what the library said.
#include <iostream>
#include <system_error>

#include <shmclock/shmclock.hpp>

int main(int argc, char **argv)
{
	if (argc != 2) {
		std::cerr << "usage: ctr-cxx-reader CLOCK\n";
		return 2;
	}
	try {
		shmclock::clock c(argv[1]);
		std::cout << c.now_ns() << "\n";
	} catch (const std::system_error &e) {
		std::cerr << "ctr-cxx-reader: " << e.what() << "\n";
		return 1;
	}
	return 0;
}
