/* hash.cpp — SQL wrappers of the ordering-key hash (the arithmetic is in ordering_hash.cpp). */
#include "pg_boundary.hpp" /* first: postgres.h before any other header */
#include "ordering_hash.hpp"
#include "validate.hpp"

extern "C"
{
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
}

#include <cstdint>

namespace
{

/* Hash of a bytea's raw bytes. */
std::uint64_t
hash_bytea(bytea *key)
{
	return awa::ordering_key_hash(reinterpret_cast<const unsigned char *>(VARDATA_ANY(key)), VARSIZE_ANY_EXHDR(key));
}

/* Hash of a text's UTF-8 bytes, converting from the database encoding when it differs. */
std::uint64_t
hash_text_utf8(text *key)
{
	const char *src = VARDATA_ANY(key);
	int len = VARSIZE_ANY_EXHDR(key);
	char *utf8 = reinterpret_cast<char *>(pg_do_encoding_conversion(
		reinterpret_cast<unsigned char *>(const_cast<char *>(src)), len, GetDatabaseEncoding(), PG_UTF8));
	std::uint64_t h;

	if (utf8 != src)
		len = strlen(utf8);
	h = awa::ordering_key_hash(reinterpret_cast<const unsigned char *>(utf8), len);
	if (utf8 != src)
		pfree(utf8);
	return h;
}

} // namespace

/* awa.ordering_key_hash(bytea): the unsigned hash reinterpreted as int8. */
AWA_SQL_FUNCTION(awa_ordering_key_hash_bytea)
{
	return Int64GetDatum(static_cast<int64>(hash_bytea(PG_GETARG_BYTEA_PP(0))));
}

/* awa.ordering_key_hash(text): hashes the UTF-8 encoding of the text. */
AWA_SQL_FUNCTION(awa_ordering_key_hash_text)
{
	return Int64GetDatum(static_cast<int64>(hash_text_utf8(PG_GETARG_TEXT_PP(0))));
}

/* awa.shard_for_ordering_key(bytea, bigint): NULL key -> NULL (no key, the rotor decides). */
AWA_SQL_FUNCTION(awa_shard_for_ordering_key_bytea)
{
	int shards = awa::shards_arg(fcinfo, 1, "shards");

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	return Int16GetDatum(static_cast<int16>(awa::shard_for_hash(hash_bytea(PG_GETARG_BYTEA_PP(0)), shards)));
}

/* awa.shard_for_ordering_key(text, bigint). */
AWA_SQL_FUNCTION(awa_shard_for_ordering_key_text)
{
	int shards = awa::shards_arg(fcinfo, 1, "shards");

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	return Int16GetDatum(static_cast<int16>(awa::shard_for_hash(hash_text_utf8(PG_GETARG_TEXT_PP(0)), shards)));
}
