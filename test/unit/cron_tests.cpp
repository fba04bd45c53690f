/*
 * cron_tests.cpp — tests of the cron parser and tick search (src/cron.cpp), no server needed:
 * every field form, names, @aliases, 'N seconds', bad input with its exact message, month
 * ends, Feb 29, the day-of-month/day-of-week rule, and daylight-saving changes in synthetic
 * zones with the rules of Europe/Berlin and America/New_York.
 */
#include "cron.hpp"

#include <cstdio>
#include <string>

#include "pure_cpp.hpp" /* last: the pure headers above brought in no PostgreSQL header */

void run_cron_tests(void (*check)(bool, const std::string &));

namespace
{

void (*check)(bool, const std::string &);

/* Seconds since the epoch of a UTC date and time. */
std::int64_t
at(std::int64_t y, int mo, int d, int h, int mi, int s = 0)
{
	return awa::days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + s;
}

/* The day of the month of the last Sunday of a month, and of the n-th Sunday. */
int
last_sunday(std::int64_t y, int mo)
{
	int last = 31;
	while (true)
	{
		std::int64_t days = awa::days_from_civil(y, mo, last);
		std::int64_t yy;
		int m2, d2;
		awa::civil_from_days(days, &yy, &m2, &d2);
		if (m2 == mo && ((days % 7) + 7 + 4) % 7 == 0)
			return last;
		last--;
	}
}

int
nth_sunday(std::int64_t y, int mo, int n)
{
	int found = 0;
	for (int d = 1;; d++)
		if (((awa::days_from_civil(y, mo, d) % 7) + 7 + 4) % 7 == 0 && ++found == n)
			return d;
}

/* The European Union rule: summer time from the last Sunday of March to the last of October, 01:00 UTC. */
class EuZone : public awa::CronZone
{
  public:
	explicit EuZone(std::int64_t standard) : standard_(standard)
	{
	}
	/* Standard offset, one hour more in summer. */
	std::int64_t offset_at(std::int64_t t) const override
	{
		std::int64_t y;
		int m, d;
		awa::civil_from_days(t >= 0 ? t / 86400 : (t - 86399) / 86400, &y, &m, &d);
		std::int64_t start = at(y, 3, last_sunday(y, 3), 1, 0);
		std::int64_t end = at(y, 10, last_sunday(y, 10), 1, 0);
		return t >= start && t < end ? standard_ + 3600 : standard_;
	}

  private:
	std::int64_t standard_;
};

/* The United States rule: second Sunday of March 02:00 local to first Sunday of November 02:00 local. */
class UsZone : public awa::CronZone
{
  public:
	explicit UsZone(std::int64_t standard) : standard_(standard)
	{
	}
	/* Standard offset, one hour more in summer. */
	std::int64_t offset_at(std::int64_t t) const override
	{
		std::int64_t y;
		int m, d;
		awa::civil_from_days(t >= 0 ? t / 86400 : (t - 86399) / 86400, &y, &m, &d);
		std::int64_t start = at(y, 3, nth_sunday(y, 3, 2), 2, 0) - standard_;
		std::int64_t end = at(y, 11, nth_sunday(y, 11, 1), 2, 0) - (standard_ + 3600);
		return t >= start && t < end ? standard_ + 3600 : standard_;
	}

  private:
	std::int64_t standard_;
};

const awa::FixedCronZone kUtc(0);

/* The next tick of an expression after an instant, or -1 when none (or a parse error). */
std::int64_t
next_of(const char *expr, std::int64_t after, const awa::CronZone &zone = kUtc)
{
	awa::CronSpec spec;
	char error[256];
	std::int64_t next;

	if (!awa::cron_parse(expr, &spec, error, sizeof(error)))
		return -1;
	return awa::cron_next(spec, zone, after, &next) ? next : -1;
}

/* The parse error of an expression ("" when it parses). */
std::string
error_of(const char *expr)
{
	awa::CronSpec spec;
	char error[256];

	return awa::cron_parse(expr, &spec, error, sizeof(error)) ? "" : error;
}

/* Whether next_of gives the expected instant; prints both on failure. */
void
expect_next(const char *expr, std::int64_t after, std::int64_t expected, const std::string &what,
			const awa::CronZone &zone = kUtc)
{
	std::int64_t got = next_of(expr, after, zone);
	check(got == expected,
		  what + " (" + expr + "): got " + std::to_string(got) + ", expected " + std::to_string(expected));
}

/* Every field form, names and aliases. */
void
test_forms()
{
	std::int64_t t = at(2026, 1, 7, 10, 7, 30); /* a Wednesday */
	expect_next("* * * * *", t, at(2026, 1, 7, 10, 8), "every minute");
	expect_next("*/15 * * * *", t, at(2026, 1, 7, 10, 15), "minute step");
	expect_next("5,10,50 * * * *", t, at(2026, 1, 7, 10, 10), "minute list");
	expect_next("20-22 * * * *", t, at(2026, 1, 7, 10, 20), "minute range");
	expect_next("0-30/20 * * * *", t, at(2026, 1, 7, 10, 20), "range with step");
	expect_next("8/20 * * * *", at(2026, 1, 7, 10, 9), at(2026, 1, 7, 10, 28), "value with step runs to the end");
	expect_next("0 */6 * * *", t, at(2026, 1, 7, 12, 0), "hour step");
	expect_next("0 9 * * mon-fri", at(2026, 1, 9, 10, 0), at(2026, 1, 12, 9, 0), "weekday names skip the weekend");
	expect_next("0 9 * * MON-FRI", at(2026, 1, 9, 10, 0), at(2026, 1, 12, 9, 0), "names in upper case");
	expect_next("0 0 * * 7", t, at(2026, 1, 11, 0, 0), "7 is Sunday");
	expect_next("0 0 * * 5-7", at(2026, 1, 10, 12, 0), at(2026, 1, 11, 0, 0), "range ending in 7 includes Sunday");
	expect_next("0 0 1 jun,dec *", t, at(2026, 6, 1, 0, 0), "month names");
	expect_next("0 0 1 feb-apr *", t, at(2026, 2, 1, 0, 0), "month name range");
	expect_next("@yearly", t, at(2027, 1, 1, 0, 0), "@yearly");
	expect_next("@annually", t, at(2027, 1, 1, 0, 0), "@annually");
	expect_next("@monthly", t, at(2026, 2, 1, 0, 0), "@monthly");
	expect_next("@weekly", t, at(2026, 1, 11, 0, 0), "@weekly is Sunday midnight");
	expect_next("@daily", t, at(2026, 1, 8, 0, 0), "@daily");
	expect_next("@midnight", t, at(2026, 1, 8, 0, 0), "@midnight");
	expect_next("@hourly", t, at(2026, 1, 7, 11, 0), "@hourly");
	expect_next("@HOURLY", t, at(2026, 1, 7, 11, 0), "aliases ignore case");
	expect_next("  0   12 * * *  ", t, at(2026, 1, 7, 12, 0), "extra white space");
	expect_next("10 seconds", t, at(2026, 1, 7, 10, 7, 40), "10 seconds");
	expect_next("1 second", t, t + 1, "1 second");
	expect_next("59 seconds", at(2026, 1, 7, 10, 7, 0), at(2026, 1, 7, 10, 7, 0) + 59 - (at(2026, 1, 7, 10, 7, 0) % 59),
				"59 seconds: multiples of 59 since the epoch");
	expect_next("30 seconds", at(2026, 1, 7, 10, 7, 30), at(2026, 1, 7, 10, 8, 0), "strictly after a tick");
	expect_next("* * * * *", at(2026, 1, 7, 10, 8, 0), at(2026, 1, 7, 10, 9), "strictly after a minute tick");
	expect_next("59 23 31 12 *", at(2026, 12, 31, 23, 59), at(2027, 12, 31, 23, 59), "last minute of the year");
}

/* Month ends, Feb 29, the day rule and expressions that match nothing. */
void
test_calendar()
{
	expect_next("0 0 31 * *", at(2026, 1, 31, 0, 0), at(2026, 3, 31, 0, 0), "day 31 skips February");
	expect_next("0 0 31 * *", at(2026, 3, 31, 0, 0), at(2026, 5, 31, 0, 0), "day 31 skips April");
	expect_next("0 0 30 * *", at(2026, 1, 30, 0, 0), at(2026, 3, 30, 0, 0), "day 30 skips February");
	expect_next("0 0 29 2 *", at(2026, 3, 1, 0, 0), at(2028, 2, 29, 0, 0), "Feb 29 in the next leap year");
	expect_next("0 0 29 2 *", at(2096, 3, 1, 0, 0), at(2104, 2, 29, 0, 0), "2100 is no leap year");
	expect_next("0 0 29 2 *", at(2000, 1, 1, 0, 0), at(2000, 2, 29, 0, 0), "2000 is a leap year");
	expect_next("0 0 28-31 2 *", at(2026, 2, 28, 0, 0), at(2027, 2, 28, 0, 0), "February of a common year");
	/* Both day fields restricted: either matches (2026-01-02 is a Friday). */
	expect_next("0 0 13 * fri", at(2026, 1, 1, 0, 0), at(2026, 1, 2, 0, 0), "day-of-month OR day-of-week: Friday");
	expect_next("0 0 13 * fri", at(2026, 1, 9, 0, 0), at(2026, 1, 13, 0, 0), "day-of-month OR day-of-week: 13th");
	/* One day field starting with '*': both must match. */
	expect_next("0 0 * * fri", at(2026, 1, 2, 0, 0), at(2026, 1, 9, 0, 0), "star day-of-month: Fridays only");
	expect_next("0 0 */2 * fri", at(2026, 1, 2, 0, 0), at(2026, 1, 9, 0, 0), "*/2 day-of-month AND Friday (9th)");
	expect_next("0 0 */2 * fri", at(2026, 1, 9, 0, 0), at(2026, 1, 23, 0, 0), "*/2 day-of-month AND Friday (23rd)");
	expect_next("0 0 13 * *", at(2026, 1, 2, 0, 0), at(2026, 1, 13, 0, 0), "star day-of-week: 13th only");
	/* A 29 February on a Sunday: 28 years apart, and 40 across a century's skipped leap day. */
	expect_next("0 0 29 2 */7", at(2026, 12, 6, 0, 0), at(2032, 2, 29, 0, 0), "Feb 29 on a Sunday");
	expect_next("0 0 29 2 */7", at(2032, 3, 1, 0, 0), at(2060, 2, 29, 0, 0), "the next Sunday Feb 29, 28 years on");
	expect_next("0 0 29 2 */7", at(2680, 3, 1, 0, 0), at(2720, 2, 29, 0, 0), "40 years on, across 2700");
	check(next_of("0 0 31 2 *", at(2026, 1, 1, 0, 0)) == -1, "Feb 31 never comes");
	check(next_of("0 0 31 4,6,9,11 *", at(2026, 1, 1, 0, 0)) == -1, "31 in 30-day months never comes");
	check(next_of("0 0 30 2 fri", at(2026, 1, 1, 0, 0)) == at(2026, 2, 6, 0, 0),
		  "Feb 30 OR Friday: Fridays of February");
}

/* Bad expressions: the exact messages, each naming its field. */
void
test_errors()
{
	struct Case
	{
		const char *expr;
		const char *message;
	};
	const Case cases[] = {
		{"61 * * * *", "minute field: 61 is out of range 0-59"},
		{"* 24 * * *", "hour field: 24 is out of range 0-23"},
		{"* * 0 * *", "day-of-month field: 0 is out of range 1-31"},
		{"* * 32 * *", "day-of-month field: 32 is out of range 1-31"},
		{"* * * 13 *", "month field: 13 is out of range 1-12"},
		{"* * * * 8", "day-of-week field: 8 is out of range 0-7"},
		{"x * * * *", "minute field: \"x\" is not a number"},
		{"* * * foo *", "month field: \"foo\" is not a number or month name"},
		{"* * * * funday", "day-of-week field: \"funday\" is not a number or day name"},
		{"*/0 * * * *", "minute field: step 0 is out of range 1-60"},
		{"* */25 * * *", "hour field: step 25 is out of range 1-24"},
		{"* * * * */8", "day-of-week field: step 8 is out of range 1-7"},
		{"*/x * * * *", "minute field: step \"x\" is not a number"},
		{"30-10 * * * *", "minute field: range 30-10 starts after it ends"},
		{"1,,2 * * * *", "minute field: empty item in list"},
		{"-5 * * * *", "minute field: \"-5\" is not a valid item"},
		{"5- * * * *", "minute field: \"5-\" is not a valid item"},
		{"1-2-3 * * * *", "minute field: \"2-3\" is not a number"},
		{"99999999999 * * * *", "minute field: 99999999999 is out of range 0-59"},
		{"* * * *", "cron expression must have 5 fields (minute hour day-of-month month day-of-week), not 4"},
		{"* * * * * *", "cron expression must have 5 fields (minute hour day-of-month month day-of-week), not 6"},
		{"", "cron expression is empty"},
		{"   ", "cron expression is empty"},
		{"@reboot", "unknown cron alias \"@reboot\""},
		{"@often", "unknown cron alias \"@often\""},
		{"0 seconds", "seconds field: 0 is out of range 1-59"},
		{"60 seconds", "seconds field: 60 is out of range 1-59"},
		/* Two words are a number and the unit: never glued into one number. */
		{"1 2seconds", "cron expression must have 5 fields (minute hour day-of-month month day-of-week), not 2"},
		{"5 5seconds", "cron expression must have 5 fields (minute hour day-of-month month day-of-week), not 2"},
		{"5 x", "cron expression must have 5 fields (minute hour day-of-month month day-of-week), not 2"},
	};
	for (const Case &c : cases)
	{
		std::string got = error_of(c.expr);
		check(got == c.message, std::string("error for \"") + c.expr + "\": got \"" + got + "\"");
	}
	check(error_of("0 0 * * sun") == "" && error_of("5/10 * * * *") == "" && error_of("1 seconds") == "" &&
			  error_of("7seconds") == "" && error_of("1 second") == "",
		  "good expressions parse");
}

/* Daylight saving in the European rule (Berlin: UTC+1, summer UTC+2). 2026: 29 March and 25 October. */
void
test_dst_berlin()
{
	EuZone berlin(3600);

	/* Spring forward: 02:00-02:59 local does not exist on 29 March 2026 (01:00 UTC). */
	expect_next("30 2 * * *", at(2026, 3, 28, 12, 0), at(2026, 3, 29, 1, 0),
				"fixed time in the gap runs at the gap's end", berlin);
	expect_next("30 2 * * *", at(2026, 3, 29, 1, 0), at(2026, 3, 30, 0, 30), "and the next day at 02:30 CEST", berlin);
	expect_next("0 3 * * *", at(2026, 3, 29, 0, 59), at(2026, 3, 29, 1, 0), "03:00 CEST is the gap's end", berlin);
	expect_next("30 * * * *", at(2026, 3, 29, 0, 30), at(2026, 3, 29, 1, 30), "hourly skips the missing 02:30", berlin);
	expect_next("*/30 * * * *", at(2026, 3, 29, 0, 30), at(2026, 3, 29, 1, 0), "wildcard: next existing time", berlin);
	/* Fixed ticks in one gap collapse into one instant: never twice. */
	expect_next("0,30 2,3 * * *", at(2026, 3, 29, 0, 59), at(2026, 3, 29, 1, 0), "several gap ticks: one at the end",
				berlin);
	expect_next("0,30 2,3 * * *", at(2026, 3, 29, 1, 0), at(2026, 3, 29, 1, 30), "then 03:30 CEST", berlin);

	/* Fall back: 02:00-02:59 local happens twice on 25 October 2026 (01:00 UTC back to 02:00). */
	expect_next("30 2 * * *", at(2026, 10, 24, 12, 0), at(2026, 10, 25, 0, 30), "fixed time: first occurrence", berlin);
	expect_next("30 2 * * *", at(2026, 10, 25, 0, 30), at(2026, 10, 26, 1, 30), "and not the second", berlin);
	expect_next("30 * * * *", at(2026, 10, 25, 0, 0), at(2026, 10, 25, 0, 30), "wildcard: first 02:30", berlin);
	expect_next("30 * * * *", at(2026, 10, 25, 0, 30), at(2026, 10, 25, 1, 30), "wildcard: second 02:30", berlin);
	expect_next("30 * * * *", at(2026, 10, 25, 1, 30), at(2026, 10, 25, 2, 30), "wildcard: then 03:30 CET", berlin);
	expect_next("0 12 * * *", at(2026, 10, 24, 12, 0), at(2026, 10, 25, 11, 0), "noon moves to 11:00 UTC", berlin);
	expect_next("10 seconds", at(2026, 10, 25, 0, 59, 55), at(2026, 10, 25, 1, 0, 0), "seconds ignore the zone",
				berlin);
}

/* Daylight saving in the United States rule (New York: UTC-5, summer UTC-4). 2026: 8 March and 1 November. */
void
test_dst_new_york()
{
	UsZone new_york(-5 * 3600);

	expect_next("30 2 * * *", at(2026, 3, 7, 12, 0), at(2026, 3, 8, 7, 0), "New York: gap time runs at 03:00 EDT",
				new_york);
	expect_next("0 2 * * *", at(2026, 3, 8, 7, 0), at(2026, 3, 9, 6, 0), "New York: then 02:00 EDT", new_york);
	expect_next("30 1 * * *", at(2026, 10, 31, 12, 0), at(2026, 11, 1, 5, 30), "New York: 01:30 EDT, first", new_york);
	expect_next("30 1 * * *", at(2026, 11, 1, 5, 30), at(2026, 11, 2, 6, 30), "New York: not 01:30 EST", new_york);
	expect_next("30 * * * *", at(2026, 11, 1, 5, 30), at(2026, 11, 1, 6, 30), "New York: hourly 01:30 EST", new_york);
	expect_next("0 9 * * *", at(2026, 11, 1, 0, 0), at(2026, 11, 1, 14, 0), "New York: 09:00 EST", new_york);
}

/* The latest tick of a stretch (the catch-up after downtime). */
void
test_latest()
{
	awa::CronSpec spec;
	char error[256];
	EuZone berlin(3600);

	check(awa::cron_parse("*/5 * * * *", &spec, error, sizeof(error)), "parse */5");
	check(awa::cron_latest(spec, kUtc, at(2026, 1, 1, 0, 0), at(2026, 1, 2, 0, 2)) == at(2026, 1, 2, 0, 0),
		  "latest of a day of */5");
	check(awa::cron_latest(spec, kUtc, at(2026, 1, 1, 0, 0), at(2026, 1, 1, 0, 4)) == at(2026, 1, 1, 0, 0),
		  "no later tick: from itself");
	check(awa::cron_latest(spec, kUtc, at(2026, 1, 1, 0, 0), at(2026, 1, 1, 0, 5)) == at(2026, 1, 1, 0, 5),
		  "a tick at until counts");
	check(awa::cron_latest(spec, kUtc, at(2000, 1, 1, 0, 0), at(2026, 7, 4, 13, 37)) == at(2026, 7, 4, 13, 35),
		  "latest after 26 years");
	check(awa::cron_parse("0 9 * * mon", &spec, error, sizeof(error)), "parse weekly");
	check(awa::cron_latest(spec, berlin, at(2026, 1, 5, 8, 0), at(2026, 7, 1, 0, 0)) == at(2026, 6, 29, 7, 0),
		  "latest Monday 09:00 CEST");
	check(awa::cron_parse("17 seconds", &spec, error, sizeof(error)), "parse seconds");
	check(awa::cron_latest(spec, kUtc, 17 * 1000, 17 * 2000 + 16) == 17 * 2000, "latest of N seconds");
	check(awa::cron_parse("30 * * * *", &spec, error, sizeof(error)), "parse hourly");
	check(awa::cron_latest(spec, berlin, at(2026, 10, 24, 0, 30), at(2026, 10, 25, 1, 45)) == at(2026, 10, 25, 1, 30),
		  "latest across fall-back: the second 02:30");
}

/* Day numbers round-trip. */
void
test_civil()
{
	bool ok = true;
	for (std::int64_t days = -800000; days < 800000; days += 97)
	{
		std::int64_t y;
		int m, d;
		awa::civil_from_days(days, &y, &m, &d);
		ok = ok && awa::days_from_civil(y, m, d) == days;
	}
	check(ok, "civil dates round-trip");
	check(awa::days_from_civil(1970, 1, 1) == 0 && awa::days_from_civil(2000, 3, 1) == 11017, "known day numbers");
}

} // namespace

/* All cron tests, reporting through the runner's check(). */
void
run_cron_tests(void (*checker)(bool, const std::string &))
{
	check = checker;
	test_civil();
	test_forms();
	test_calendar();
	test_errors();
	test_dst_berlin();
	test_dst_new_york();
	test_latest();
}
