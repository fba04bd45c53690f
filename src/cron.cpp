/*
 * cron.cpp — cron expressions and their ticks (pure C++; docs/api.md, "Periodic jobs").
 * The five fields are matched on wall-clock time; the zone maps wall-clock times to instants
 * with Vixie cron's daylight-saving rules: a wall-clock time skipped by a forward change runs
 * at the first instant after the gap when the minute and hour fields are both fixed (and is
 * skipped otherwise); a repeated wall-clock time runs once, at its first occurrence, when
 * they are fixed, and at both occurrences otherwise.
 */
#include "cron.hpp"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "pure_cpp.hpp" /* last: proves that nothing above brought in a PostgreSQL header */

namespace awa
{

namespace
{

constexpr std::int64_t kDay = 86400;
/* The largest backward change of a zone's offset that the tick search allows for. */
constexpr std::int64_t kMaxShift = kCronMaxBackShift;
/*
 * How far ahead a tick is searched for before the expression is taken as matching nothing:
 * the Gregorian calendar repeats every 400 years (146,097 days, a whole number of weeks), so
 * an expression that matches no date in 400 years matches none ever (a 29 February that must
 * fall on a given weekday can be decades away).
 */
constexpr int kSearchYears = 400;

const char *const kMonthNames[] = {"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"};
const char *const kDayNames[] = {"sun", "mon", "tue", "wed", "thu", "fri", "sat"};

/* One of the five fields: its name in messages, its range and its names, if any. */
struct Field
{
	const char *name;
	int min;
	int max;
	const char *const *names; /* names[i] is the value names_base + i */
	int names_count;
	int names_base;
	const char *names_what; /* "month name" or "day name" */
};

const Field kFields[5] = {
	{"minute", 0, 59, nullptr, 0, 0, nullptr},			{"hour", 0, 23, nullptr, 0, 0, nullptr},
	{"day-of-month", 1, 31, nullptr, 0, 0, nullptr},	{"month", 1, 12, kMonthNames, 12, 1, "month name"},
	{"day-of-week", 0, 7, kDayNames, 7, 0, "day name"},
};

/* Floor division for possibly negative instants. */
std::int64_t
floor_div(std::int64_t a, std::int64_t b)
{
	std::int64_t q = a / b;

	return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* Copy a message into the caller's buffer, truncated and NUL-terminated. */
void
set_error(char *error, std::size_t size, const std::string &message)
{
	if (size == 0)
		return;
	std::snprintf(error, size, "%s", message.c_str());
}

/* Lower-case ASCII copy. */
std::string
lower(const std::string &s)
{
	std::string out(s);

	for (char &c : out)
		c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
	return out;
}

/* Whether s is one or more ASCII digits. */
bool
all_digits(const std::string &s)
{
	if (s.empty())
		return false;
	for (char c : s)
		if (c < '0' || c > '9')
			return false;
	return true;
}

/* A field value (number or name) within the field's range; false with a message otherwise. */
bool
parse_value(const std::string &s, const Field &f, int *value, std::string *message)
{
	if (all_digits(s))
	{
		long v = s.size() > 6 ? 9999999 : std::strtol(s.c_str(), nullptr, 10);

		if (v < f.min || v > f.max)
		{
			*message = s + " is out of range " + std::to_string(f.min) + "-" + std::to_string(f.max);
			return false;
		}
		*value = static_cast<int>(v);
		return true;
	}
	if (f.names != nullptr)
	{
		std::string l = lower(s);

		for (int i = 0; i < f.names_count; i++)
			if (l == f.names[i])
			{
				*value = f.names_base + i;
				return true;
			}
		*message = "\"" + s + "\" is not a number or " + f.names_what;
		return false;
	}
	*message = "\"" + s + "\" is not a number";
	return false;
}

/* One list item: *, a, a-b, each optionally /step; sets its values in bits. */
bool
parse_item(const std::string &item, const Field &f, std::vector<bool> *bits, std::string *message)
{
	std::string base = item;
	int step = 1;
	bool has_step = false;
	std::size_t slash = item.find('/');

	if (item.empty())
	{
		*message = "empty item in list";
		return false;
	}
	if (slash != std::string::npos)
	{
		std::string s = item.substr(slash + 1);
		int span = f.max == 7 ? 7 : f.max - f.min + 1; /* day-of-week: 7 is Sunday again */

		base = item.substr(0, slash);
		has_step = true;
		if (!all_digits(s))
		{
			*message = "step \"" + s + "\" is not a number";
			return false;
		}
		long v = s.size() > 6 ? 9999999 : std::strtol(s.c_str(), nullptr, 10);
		if (v < 1 || v > span)
		{
			*message = "step " + s + " is out of range 1-" + std::to_string(span);
			return false;
		}
		step = static_cast<int>(v);
	}

	int lo, hi;
	std::size_t dash = base.find('-');

	if (base == "*")
	{
		lo = f.min;
		hi = f.max;
	}
	else if (base.empty())
	{
		*message = "\"" + item + "\" is not a valid item";
		return false;
	}
	else if (dash != std::string::npos)
	{
		std::string a = base.substr(0, dash), b = base.substr(dash + 1);

		if (a.empty() || b.empty())
		{
			*message = "\"" + item + "\" is not a valid item";
			return false;
		}
		if (!parse_value(a, f, &lo, message) || !parse_value(b, f, &hi, message))
			return false;
		if (lo > hi)
		{
			*message = "range " + base + " starts after it ends";
			return false;
		}
	}
	else
	{
		if (!parse_value(base, f, &lo, message))
			return false;
		/* "a/step" runs from a to the end of the range, as in cronie. */
		hi = has_step ? f.max : lo;
	}
	for (int v = lo; v <= hi; v += step)
		(*bits)[static_cast<std::size_t>(v)] = true;
	return true;
}

/* One whole field (comma-separated items); false with "<field> field: ..." in message. */
bool
parse_field(const std::string &text, const Field &f, std::vector<bool> *bits, std::string *message)
{
	std::size_t start = 0;

	bits->assign(static_cast<std::size_t>(f.max) + 1, false);
	for (;;)
	{
		std::size_t comma = text.find(',', start);
		std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);

		if (!parse_item(item, f, bits, message))
		{
			*message = std::string(f.name) + " field: " + *message;
			return false;
		}
		if (comma == std::string::npos)
			return true;
		start = comma + 1;
	}
}

/* Split on ASCII white space. */
std::vector<std::string>
split_words(const std::string &s)
{
	std::vector<std::string> words;
	std::string word;

	for (char c : s)
	{
		if (std::isspace(static_cast<unsigned char>(c)))
		{
			if (!word.empty())
				words.push_back(word);
			word.clear();
		}
		else
			word.push_back(c);
	}
	if (!word.empty())
		words.push_back(word);
	return words;
}

/* Days in a month of a proleptic Gregorian year. */
int
days_in_month(std::int64_t year, int month)
{
	static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;

	return month == 2 && leap ? 29 : kDays[month - 1];
}

/* Vixie cron's day rule: both day fields restricted -> either matches; else both must. */
bool
day_matches(const CronSpec &spec, std::int64_t year, int month, int day)
{
	std::int64_t days = days_from_civil(year, month, day);
	int weekday = static_cast<int>(((days % 7) + 7 + 4) % 7); /* 1970-01-01 was a Thursday */
	bool dom = spec.days[static_cast<std::size_t>(day)];
	bool dow = spec.weekdays[static_cast<std::size_t>(weekday)];

	if (spec.days_star || spec.weekdays_star)
		return dom && dow;
	return dom || dow;
}

/* A wall-clock calendar position, moved forward field by field. */
struct Wall
{
	std::int64_t year;
	int month, day, hour, minute;

	/* The first minute of the next day. */
	void next_day()
	{
		hour = 0;
		minute = 0;
		if (++day > days_in_month(year, month))
		{
			day = 1;
			if (++month > 12)
			{
				month = 1;
				year++;
			}
		}
	}
};

/*
 * The first wall-clock time (seconds of the local calendar, as if it were UTC) strictly after
 * `after` that matches the five fields; false when none within kSearchYears.
 */
bool
next_wall(const CronSpec &spec, std::int64_t after, std::int64_t *out)
{
	std::int64_t t = floor_div(after, 60) * 60 + 60;
	std::int64_t days = floor_div(t, kDay);
	std::int64_t second_of_day = t - days * kDay;
	Wall w;

	civil_from_days(days, &w.year, &w.month, &w.day);
	w.hour = static_cast<int>(second_of_day / 3600);
	w.minute = static_cast<int>(second_of_day % 3600 / 60);

	std::int64_t last_year = w.year + kSearchYears;

	while (w.year <= last_year)
	{
		if (!spec.months[static_cast<std::size_t>(w.month)])
		{
			w.day = days_in_month(w.year, w.month); /* next_day moves to the next month */
			w.next_day();
		}
		else if (!day_matches(spec, w.year, w.month, w.day))
			w.next_day();
		else if (!spec.hours[static_cast<std::size_t>(w.hour)])
		{
			w.minute = 0;
			if (++w.hour > 23)
				w.next_day();
		}
		else if (!spec.minutes[static_cast<std::size_t>(w.minute)])
		{
			if (++w.minute > 59)
			{
				w.minute = 0;
				if (++w.hour > 23)
					w.next_day();
			}
		}
		else
		{
			*out = days_from_civil(w.year, w.month, w.day) * kDay + w.hour * 3600 + w.minute * 60;
			return true;
		}
	}
	return false;
}

/*
 * The instants of one matching wall-clock time (0, 1 or 2 of them) in the zone, by Vixie
 * cron's rules: a time in a gap maps to the gap's end if the schedule is fixed-time, else to
 * nothing; a repeated time maps to its first occurrence if fixed-time, else to both.
 */
int
instants_of_wall(const CronSpec &spec, const CronZone &zone, std::int64_t wall, std::int64_t out[2])
{
	std::int64_t before = zone.offset_at(wall - kDay);
	std::int64_t after = zone.offset_at(wall + kDay);
	std::int64_t u1 = wall - before, u2 = wall - after;

	if (before == after)
	{
		out[0] = u1;
		return 1;
	}
	bool valid1 = zone.offset_at(u1) == before;
	bool valid2 = zone.offset_at(u2) == after;

	if (valid1 && valid2)
	{
		out[0] = u1 < u2 ? u1 : u2;
		out[1] = u1 < u2 ? u2 : u1;
		return spec.fixed_time ? 1 : 2;
	}
	if (valid1 || valid2)
	{
		out[0] = valid1 ? u1 : u2;
		return 1;
	}
	if (!spec.fixed_time)
		return 0;

	/* A gap: the first instant after it, where the offset changes between lo and hi. */
	std::int64_t lo = u1 < u2 ? u1 : u2, hi = u1 < u2 ? u2 : u1;
	std::int64_t lo_offset = zone.offset_at(lo);

	while (hi - lo > 1)
	{
		std::int64_t mid = lo + (hi - lo) / 2;

		if (zone.offset_at(mid) == lo_offset)
			lo = mid;
		else
			hi = mid;
	}
	out[0] = hi;
	return 1;
}

} // namespace

/* Days since 1970-01-01 (Howard Hinnant's days_from_civil). */
std::int64_t
days_from_civil(std::int64_t year, int month, int day)
{
	year -= month <= 2;
	std::int64_t era = floor_div(year, 400);
	std::int64_t yoe = year - era * 400;
	std::int64_t doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1;
	std::int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;

	return era * 146097 + doe - 719468;
}

/* The date of a day number (Howard Hinnant's civil_from_days). */
void
civil_from_days(std::int64_t days, std::int64_t *year, int *month, int *day)
{
	days += 719468;
	std::int64_t era = floor_div(days, 146097);
	std::int64_t doe = days - era * 146097;
	std::int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	std::int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	std::int64_t mp = (5 * doy + 2) / 153;

	*day = static_cast<int>(doy - (153 * mp + 2) / 5 + 1);
	*month = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
	*year = yoe + era * 400 + (*month <= 2);
}

/* Parse the five-field form, an @alias or 'N seconds' (docs/api.md, "Periodic jobs"). */
bool
cron_parse(const char *expr, CronSpec *spec, char *error, std::size_t error_size)
{
	std::vector<std::string> words = split_words(expr == nullptr ? "" : expr);
	std::string message;

	*spec = CronSpec();
	if (words.empty())
	{
		set_error(error, error_size, "cron expression is empty");
		return false;
	}
	if (words.size() == 1 && words[0][0] == '@')
	{
		static const char *const kAliases[][2] = {
			{"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"}, {"@weekly", "0 0 * * 0"},
			{"@daily", "0 0 * * *"},  {"@midnight", "0 0 * * *"}, {"@hourly", "0 * * * *"},
		};
		std::string alias = lower(words[0]);

		for (const auto &a : kAliases)
			if (alias == a[0])
				return cron_parse(a[1], spec, error, error_size);
		set_error(error, error_size, "unknown cron alias \"" + words[0] + "\"");
		return false;
	}
	/*
	 * pg_cron's interval form: "N seconds" (or "N second", or the number and the unit without
	 * the space), N in 1..59. Of two words the first is the whole number and the second the
	 * whole unit: "1 2seconds" is no interval.
	 */
	{
		std::string l = lower(words.size() <= 2 ? words[0] : "");
		std::size_t digits = 0;

		while (digits < l.size() && l[digits] >= '0' && l[digits] <= '9')
			digits++;
		if (words.size() == 2 && digits == l.size())
			l += lower(words[1]);
		if (digits > 0 && (l.substr(digits) == "seconds" || l.substr(digits) == "second"))
		{
			std::string n = l.substr(0, digits);
			long v = n.size() > 6 ? 9999999 : std::strtol(n.c_str(), nullptr, 10);

			if (v < 1 || v > 59)
			{
				set_error(error, error_size, "seconds field: " + n + " is out of range 1-59");
				return false;
			}
			spec->every_seconds = static_cast<int>(v);
			return true;
		}
	}
	if (words.size() != 5)
	{
		set_error(error, error_size,
				  "cron expression must have 5 fields (minute hour day-of-month month day-of-week), not " +
					  std::to_string(words.size()));
		return false;
	}

	std::vector<bool> bits[5];
	for (int i = 0; i < 5; i++)
		if (!parse_field(words[static_cast<std::size_t>(i)], kFields[i], &bits[i], &message))
		{
			set_error(error, error_size, message);
			return false;
		}
	for (std::size_t v = 0; v < 60; v++)
		spec->minutes[v] = bits[0][v];
	for (std::size_t v = 0; v < 24; v++)
		spec->hours[v] = bits[1][v];
	for (std::size_t v = 1; v <= 31; v++)
		spec->days[v] = bits[2][v];
	for (std::size_t v = 1; v <= 12; v++)
		spec->months[v] = bits[3][v];
	for (std::size_t v = 0; v <= 7; v++)
		if (bits[4][v])
			spec->weekdays[v % 7] = true;
	spec->days_star = words[2][0] == '*';
	spec->weekdays_star = words[4][0] == '*';
	spec->fixed_time = words[0][0] != '*' && words[1][0] != '*';
	return true;
}

/*
 * The first tick after `after`: wall-clock candidates from just before `after`'s local time
 * (a backward change ahead can map earlier wall times later), each mapped to its instants;
 * the smallest instant after `after` wins once no later wall time can map before it.
 */
bool
cron_next(const CronSpec &spec, const CronZone &zone, std::int64_t after, std::int64_t *next)
{
	if (spec.every_seconds > 0)
	{
		*next = floor_div(after, spec.every_seconds) * spec.every_seconds + spec.every_seconds;
		return true;
	}

	std::int64_t offset = zone.offset_at(after);
	std::int64_t wall = after + offset;
	bool found = false;
	std::int64_t best = 0, stop_wall = 0;

	if (zone.offset_at(after + kMaxShift) != offset)
		wall -= kMaxShift;
	for (;;)
	{
		std::int64_t instants[2];
		int n;

		if (!next_wall(spec, wall, &wall))
			break;
		if (found && wall > stop_wall)
			break;
		n = instants_of_wall(spec, zone, wall, instants);
		for (int i = 0; i < n; i++)
		{
			if (instants[i] <= after || (found && instants[i] >= best))
				continue;
			best = instants[i];
			if (!found)
			{
				found = true;
				/* A later wall time maps earlier only across a backward change just before. */
				stop_wall = zone.offset_at(best - kMaxShift) == zone.offset_at(best) ? wall : wall + kMaxShift;
			}
		}
	}
	if (found)
		*next = best;
	return found;
}

/*
 * The latest tick in [from, until]: a bisection over cron_next, which is monotonic, so a
 * schedule stopped for years costs a few dozen steps, not one per missed tick.
 */
std::int64_t
cron_latest(const CronSpec &spec, const CronZone &zone, std::int64_t from, std::int64_t until)
{
	std::int64_t lo = from, hi = until, n;

	if (until <= from)
		return from;
	if (spec.every_seconds > 0)
	{
		std::int64_t t = floor_div(until, spec.every_seconds) * spec.every_seconds;

		return t > from ? t : from;
	}
	for (;;)
	{
		/* Invariant: lo is from or a tick, and no tick lies in (hi, until]. */
		if (!cron_next(spec, zone, lo, &n) || n > hi)
			return lo;
		lo = n;
		if (lo >= hi)
			return lo;
		std::int64_t mid = lo + (hi - lo) / 2;
		if (cron_next(spec, zone, mid, &n) && n <= hi)
			lo = n;
		else
			hi = mid;
	}
}

} // namespace awa
