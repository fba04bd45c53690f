/*
 * cron.hpp — cron expressions of periodic jobs (pure C++, no PostgreSQL header):
 * parsing the five fields, the @aliases and pg_cron's 'N seconds', and the next tick after
 * an instant in a time zone, with the daylight-saving rules of Vixie cron (docs/api.md,
 * "Periodic jobs"). Instants are seconds since 1970-01-01 UTC; the time zone is reached
 * through CronZone, so the server side plugs in PostgreSQL's zone routines and the unit
 * tests a synthetic zone.
 */
#pragma once

#include <bitset>
#include <cstddef>
#include <cstdint>

namespace awa
{

/* A parsed expression: either every N seconds, or the five cron fields as sets. */
struct CronSpec
{
	int every_seconds = 0;		/* 1..59 for 'N seconds'; 0 for the five-field form */
	std::bitset<60> minutes;	/* 0..59 */
	std::bitset<24> hours;		/* 0..23 */
	std::bitset<32> days;		/* 1..31 */
	std::bitset<13> months;		/* 1..12 */
	std::bitset<7> weekdays;	/* 0..6, Sunday = 0 (7 is read as 0) */
	bool days_star = false;		/* the day-of-month field starts with '*' */
	bool weekdays_star = false; /* the day-of-week field starts with '*' */
	bool fixed_time = false;	/* neither the minute nor the hour field starts with '*' */
};

/*
 * What the tick search assumes of a zone: its offset moves back by at most this many seconds
 * at once, and no two of its changes are less than kCronChangeGap seconds apart (both hold
 * for every zone of the tz database from now on; cron_sql.cpp refuses a zone that breaks them).
 */
constexpr std::int64_t kCronMaxBackShift = 4 * 3600;
constexpr std::int64_t kCronChangeGap = 2 * 86400;

/* A time zone as the offset (seconds east of UTC) in force at an instant. */
class CronZone
{
  public:
	virtual ~CronZone() = default;
	/* Offset from UTC at the instant; local wall time = instant + offset. */
	virtual std::int64_t offset_at(std::int64_t instant) const = 0;
};

/* The fixed offset zone (UTC when 0). */
class FixedCronZone : public CronZone
{
  public:
	explicit FixedCronZone(std::int64_t offset) : offset_(offset)
	{
	}
	/* The one offset, whatever the instant. */
	std::int64_t offset_at(std::int64_t) const override
	{
		return offset_;
	}

  private:
	std::int64_t offset_;
};

/*
 * Parse an expression into *spec. On a bad expression returns false and writes a message
 * naming the field into error (at most error_size bytes, NUL-terminated), e.g.
 * "minute field: 61 is out of range 0-59".
 */
bool cron_parse(const char *expr, CronSpec *spec, char *error, std::size_t error_size);

/*
 * The first tick strictly after `after` (seconds since the epoch) in `zone`; false when
 * there is none within ten years (e.g. "0 0 31 2 *").
 */
bool cron_next(const CronSpec &spec, const CronZone &zone, std::int64_t after, std::int64_t *next);

/*
 * The latest tick t with from <= t <= until, or `from` itself when no tick lies in
 * (from, until] (from is normally a tick: the schedule's stored next one).
 */
std::int64_t cron_latest(const CronSpec &spec, const CronZone &zone, std::int64_t from, std::int64_t until);

/* Days since 1970-01-01 of a proleptic Gregorian date (month 1..12). */
std::int64_t days_from_civil(std::int64_t year, int month, int day);

/* The date of a day number since 1970-01-01. */
void civil_from_days(std::int64_t days, std::int64_t *year, int *month, int *day);

} // namespace awa
