/*
 * unit_tests.cpp — tests of the pure C++ (hash, shard math, cron: cron_tests.cpp), no server needed.
 * Reads the shared vectors file when given (argv[1]); prints "unit: N passed, M failed".
 */
#include "ordering_hash.hpp"
#include "shard_math.hpp"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "pure_cpp.hpp" /* last: the pure headers above brought in no PostgreSQL header */

void run_cron_tests(void (*check)(bool, const std::string &));

static int passed = 0;
static int failed = 0;

/* Record one assertion. */
static void
check(bool ok, const std::string &what)
{
	if (ok)
		passed++;
	else
	{
		failed++;
		std::printf("not ok - %s\n", what.c_str());
	}
}

/* Hash of a std::string's bytes. */
static std::uint64_t
hash_of(const std::string &s)
{
	return awa::ordering_key_hash(reinterpret_cast<const unsigned char *>(s.data()), s.size());
}

/* The vectors of the reference notes, embedded so the test never depends on a file. */
static void
test_embedded_vectors()
{
	struct Vec
	{
		std::string key;
		std::uint64_t hash;
		int s2, s4, s8, s64;
	};
	std::vector<Vec> vecs = {
		{"", 14695981039346656037ULL, 1, 1, 5, 37},
		{"a", 12638153115695167552ULL, 0, 0, 0, 0},
		{"customer-42", 695220319317454988ULL, 0, 0, 4, 12},
		{"order:1001", 14549007610802403233ULL, 1, 1, 1, 33},
		{std::string(1000, '\xff'), 7051640515306827253ULL, 1, 1, 5, 53},
		{"account-42", 12338786926562354871ULL, 1, 3, 7, 55},
		{"\xc3\xa9", 590898472587934703ULL, 1, 3, 7, 47},
		{"shard-fixture-0", 16207703326091768408ULL, 0, 0, 0, 24},
		{"shard-fixture-3", 16207703326091768411ULL, 1, 3, 3, 27},
	};
	for (const auto &v : vecs)
	{
		std::uint64_t h = hash_of(v.key);
		std::string name = "key of length " + std::to_string(v.key.size());
		check(h == v.hash, name + ": hash");
		check(awa::shard_for_hash(h, 1) == 0, name + ": S=1");
		check(awa::shard_for_hash(h, 2) == v.s2, name + ": S=2");
		check(awa::shard_for_hash(h, 4) == v.s4, name + ": S=4");
		check(awa::shard_for_hash(h, 8) == v.s8, name + ": S=8");
		check(awa::shard_for_hash(h, 64) == v.s64, name + ": S=64");
	}
}

/* Decode the key_hex column of hash-vectors.tsv ("ff*1000" means 1000 bytes of 0xff). */
static std::string
decode_hex_key(const std::string &hex)
{
	std::string out;
	std::size_t star = hex.find('*');
	if (star != std::string::npos)
	{
		std::string unit = decode_hex_key(hex.substr(0, star));
		int times = std::atoi(hex.c_str() + star + 1);
		for (int i = 0; i < times; i++)
			out += unit;
		return out;
	}
	for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
		out.push_back(static_cast<char>(std::strtol(hex.substr(i, 2).c_str(), nullptr, 16)));
	return out;
}

/* Every row of the shared vectors file, when its path is given. */
static void
test_vector_file(const char *path)
{
	std::ifstream in(path);
	if (!in)
	{
		check(false, std::string("cannot open vectors file ") + path);
		return;
	}
	std::string line;
	std::getline(in, line); /* header */
	int rows = 0;
	while (std::getline(in, line))
	{
		if (line.empty())
			continue;
		std::vector<std::string> cols;
		std::stringstream ss(line);
		std::string col;
		while (std::getline(ss, col, '\t'))
			cols.push_back(col);
		if (cols.size() < 9)
		{
			check(false, "malformed vector line: " + line);
			continue;
		}
		std::string key = decode_hex_key(cols[1]);
		std::uint64_t h = hash_of(key);
		check(std::to_string(h) == cols[2], "file vector " + cols[0] + ": hash");
		check(std::to_string(static_cast<std::int64_t>(h)) == cols[3], "file vector " + cols[0] + ": int8");
		const int widths[] = {1, 2, 4, 8, 64};
		for (int i = 0; i < 5; i++)
			check(std::to_string(awa::shard_for_hash(h, widths[i])) == cols[4 + i],
				  "file vector " + cols[0] + ": S=" + std::to_string(widths[i]));
		rows++;
	}
	check(rows >= 9, "vectors file has at least 9 rows");
}

/* The traps of the reference notes: xor form, signed bytes, signed modulo. */
static void
test_traps()
{
	check(hash_of("a") != 0xaf63bd4c8601b7beULL, "add-form differs from FNV-1");
	check(hash_of("a") != 0xaf63dc4c8601ec8cULL, "add-form differs from FNV-1a");
	std::uint64_t empty = hash_of("");
	check(static_cast<std::int64_t>(empty) < 0, "empty-key hash is negative as int8");
	check(awa::shard_for_hash(empty, 4) == 1, "unsigned modulo for a negative int8 hash");
	check(awa::shard_for_hash(empty, 0) == 0 && awa::shard_for_hash(empty, -3) == 0, "S <= 1 routes to shard 0");
	int per_shard[8] = {0};
	for (int n = 0; n < 1024; n++)
		per_shard[awa::shard_for_hash(hash_of("order-" + std::to_string(n)), 8)]++;
	bool spread = true;
	for (int s = 0; s < 8; s++)
		spread = spread && per_shard[s] >= 127 && per_shard[s] <= 130;
	check(spread, "1024 order-<n> keys spread 127..130 per shard at S=8");
}

/* Rotor reduction and width bounds. */
static void
test_shard_math()
{
	check(awa::rotor_shard(0, 4) == 0 && awa::rotor_shard(5, 4) == 1, "rotor mod S");
	check(awa::rotor_shard(0xffffffffu, 4) == 3, "rotor wraps unsigned");
	check(awa::rotor_shard(7, 1) == 0, "rotor at S=1");
	check(!awa::valid_shard_count(0) && awa::valid_shard_count(1) && awa::valid_shard_count(64) &&
			  !awa::valid_shard_count(65),
		  "shard count bounds 1..64");
	awa::LaneRef a{"q", 1, 2, 0}, b{"q", 1, 2, 1}, c{"q", 1, 3, 0}, d{"qq", 2, 1, 0};
	check(awa::compare_lanes(a, b) < 0 && awa::compare_lanes(b, c) < 0 && awa::compare_lanes(c, d) < 0 &&
			  awa::compare_lanes(a, a) == 0,
		  "lane order is (queue, priority, shard)");
}

int
main(int argc, char **argv)
{
	test_embedded_vectors();
	test_traps();
	test_shard_math();
	run_cron_tests(check);
	if (argc > 1)
		test_vector_file(argv[1]);
	std::printf("unit: %d passed, %d failed\n", passed, failed);
	return failed == 0 ? 0 : 1;
}
