/*
 * cron_sql.cpp — SQL entry points of the cron expressions of periodic jobs (the parser and
 * the tick search are pure C++ in cron.cpp): PostgreSQL's time zone routines map instants to
 * wall-clock offsets. Bad expressions and zones raise 22023.
 */
#include "pg_boundary.hpp" /* first: postgres.h before any other header */
#include "cron.hpp"

extern "C"
{
#include "datatype/timestamp.h"
#include "pgtime.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
}

#include <cstdint>

namespace
{

/* Seconds between the Unix epoch and PostgreSQL's (2000-01-01). */
constexpr std::int64_t kEpochShift = (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY;

/* A PostgreSQL time zone as the offset in force at an instant (pg_localtime never raises). */
class PgCronZone final : public awa::CronZone
{
  public:
	explicit PgCronZone(const pg_tz *tz) : tz_(tz)
	{
	}
	/* tm_gmtoff of the instant's local time; 0 where pg_localtime cannot say. */
	std::int64_t offset_at(std::int64_t instant) const override
	{
		pg_time_t t = static_cast<pg_time_t>(instant);
		struct pg_tm *tm = pg_localtime(&t, tz_);

		return tm != nullptr ? tm->tm_gmtoff : 0;
	}

  private:
	const pg_tz *tz_;
};

/*
 * Whether the zone's offset changes, over the next century, as the tick search assumes
 * (cron.hpp): no change back by more than kCronMaxBackShift, no two changes less than
 * kCronChangeGap apart. A POSIX zone string (PostgreSQL accepts one where it names no file)
 * may break either: 'AAA0BBB-12,J1/0,J341/19' moves back 12 hours.
 */
bool
zone_changes_followed(const pg_tz *tz)
{
	constexpr int kYears = 100;
	pg_time_t t = timestamptz_to_time_t(GetCurrentTimestamp());
	pg_time_t end = t + static_cast<pg_time_t>(kYears) * 366 * SECS_PER_DAY;
	pg_time_t previous = 0;

	for (int i = 0; i < 4 * kYears; i++)
	{
		long before, after;
		int before_dst, after_dst;
		pg_time_t boundary;

		if (pg_next_dst_boundary(&t, &before, &before_dst, &boundary, &after, &after_dst, tz) != 1 || boundary > end)
			return true;
		if (before - after > awa::kCronMaxBackShift || (previous != 0 && boundary - previous < awa::kCronChangeGap))
			return false;
		previous = t = boundary;
	}
	return true;
}

/*
 * The zone of a p_timezone argument; 22023 when PostgreSQL does not know it, or when its
 * offset changes in ways the tick search does not follow (zone_changes_followed).
 */
pg_tz *
zone_arg(FunctionCallInfo fcinfo, int argno)
{
	char *name = text_to_cstring(PG_GETARG_TEXT_PP(argno));
	pg_tz *tz = pg_tzset(name);

	if (tz == nullptr || !pg_tz_acceptable(tz))
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("time zone \"%s\" is not recognized", name),
						errhint("Use a name of pg_timezone_names, such as 'UTC' or 'Europe/Berlin'.")));
	if (!zone_changes_followed(tz))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("time zone \"%s\" changes its offset in ways schedules do not follow", name),
				 errdetail("Within the next 100 years its offset moves back by more than 4 hours at once, or changes "
						   "twice within two days."),
				 errhint("Use a name of pg_timezone_names, such as 'UTC' or 'Europe/Berlin'.")));
	return tz;
}

/* The parsed p_cron argument; 22023 with the field's message when it does not parse. */
awa::CronSpec
spec_arg(FunctionCallInfo fcinfo, int argno)
{
	char *expr = text_to_cstring(PG_GETARG_TEXT_PP(argno));
	awa::CronSpec spec;
	char error[256];

	if (!awa::cron_parse(expr, &spec, error, sizeof(error)))
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("%s", error),
						errdetail("The cron expression is \"%s\".", expr)));
	return spec;
}

/* Whole seconds since the Unix epoch of a finite timestamptz (rounded down). */
std::int64_t
to_unix_seconds(TimestampTz ts)
{
	std::int64_t s = ts / USECS_PER_SEC;

	if (ts % USECS_PER_SEC < 0)
		s--;
	return s + kEpochShift;
}

} // namespace

/*
 * awa._cron_next(p_cron, p_timezone, p_after): the first tick strictly after p_after, or NULL
 * when the expression matches no date (none in the 400 years after p_after, the calendar's
 * cycle: then none ever), the tick lies past the last timestamp, or p_after is not finite.
 */
AWA_SQL_FUNCTION(awa_cron_next)
{
	awa::CronSpec spec = spec_arg(fcinfo, 0);
	PgCronZone zone(zone_arg(fcinfo, 1));
	TimestampTz after = PG_GETARG_TIMESTAMPTZ(2);
	std::int64_t next;
	TimestampTz result;

	if (TIMESTAMP_NOT_FINITE(after) || !awa::cron_next(spec, zone, to_unix_seconds(after), &next))
		PG_RETURN_NULL();
	if (next > (END_TIMESTAMP / USECS_PER_SEC) + kEpochShift)
		PG_RETURN_NULL();
	result = (next - kEpochShift) * USECS_PER_SEC;
	if (!IS_VALID_TIMESTAMP(result))
		PG_RETURN_NULL();
	PG_RETURN_TIMESTAMPTZ(result);
}

/*
 * awa._cron_latest(p_cron, p_timezone, p_from, p_until): the latest tick in [p_from, p_until],
 * or p_from itself when no tick lies after it (the catch-up after downtime enqueues this one).
 */
AWA_SQL_FUNCTION(awa_cron_latest)
{
	awa::CronSpec spec = spec_arg(fcinfo, 0);
	PgCronZone zone(zone_arg(fcinfo, 1));
	TimestampTz from = PG_GETARG_TIMESTAMPTZ(2);
	TimestampTz until = PG_GETARG_TIMESTAMPTZ(3);
	std::int64_t from_s, latest;

	if (TIMESTAMP_NOT_FINITE(from) || TIMESTAMP_NOT_FINITE(until) || until <= from)
		PG_RETURN_TIMESTAMPTZ(from);
	from_s = to_unix_seconds(from);
	latest = awa::cron_latest(spec, zone, from_s, to_unix_seconds(until));
	if (latest <= from_s)
		PG_RETURN_TIMESTAMPTZ(from);
	PG_RETURN_TIMESTAMPTZ((latest - kEpochShift) * USECS_PER_SEC);
}
