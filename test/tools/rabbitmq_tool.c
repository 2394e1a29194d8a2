/*
 * A small AMQP 0-9-1 client for the TAP tests and the benchmark (no Python client is packaged
 * with the test dependencies), built against rabbitmq-c by test/t/Statesman/RabbitMQ.pm:
 *
 *   rabbitmq_tool HOST PORT VHOST USER PASSWORD CMD ARGS…
 *     ping                          logs in (exit 0)
 *     queue NAME                    a durable queue
 *     exchange NAME TYPE            a durable exchange (direct, topic, fanout)
 *     bind QUEUE EXCHANGE KEY
 *     count QUEUE                   its message count
 *     purge QUEUE
 *     delete QUEUE
 *     dump QUEUE     one line per message, leaving them in the queue: routing key TAB
 *                    message_id TAB content_type TAB delivery_mode TAB the headers "k=v;…"
 *                    (longs as numbers) TAB the body in hex
 *     bench KEY COUNT SIZE WINDOW   COUNT publishes of SIZE bytes to the default exchange with
 *                    routing key KEY (mandatory, persistent, message_id, headers), in confirm
 *                    mode with WINDOW confirms outstanding: prints "COUNT SECONDS RATE"
 * Exits 1 with a message on stderr on any failure.
 */
#include <amqp.h>
#include <amqp_framing.h>
#include <amqp_tcp_socket.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static amqp_connection_state_t conn;

static void die(const char *what, const char *why)
{
	fprintf(stderr, "rabbitmq_tool: %s: %s\n", what, why);
	exit(1);
}

static void check(const char *what, amqp_rpc_reply_t r)
{
	char buf[512];
	switch (r.reply_type)
	{
		case AMQP_RESPONSE_NORMAL:
			return;
		case AMQP_RESPONSE_LIBRARY_EXCEPTION:
			die(what, amqp_error_string2(r.library_error));
		case AMQP_RESPONSE_SERVER_EXCEPTION:
			if (r.reply.id == AMQP_CHANNEL_CLOSE_METHOD || r.reply.id == AMQP_CONNECTION_CLOSE_METHOD)
			{
				amqp_channel_close_t *c = r.reply.decoded;    /* same layout for both */
				snprintf(buf, sizeof buf, "%u %.*s", c->reply_code, (int) c->reply_text.len,
						 (char *) c->reply_text.bytes);
				die(what, buf);
			}
			die(what, "server exception");
		default:
			die(what, "no reply");
	}
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void hex(const void *data, size_t len)
{
	static const char digits[] = "0123456789abcdef";
	const unsigned char *p = data;
	for (size_t i = 0; i < len; i++)
	{
		putchar(digits[p[i] >> 4]);
		putchar(digits[p[i] & 15]);
	}
}

static void print_bytes(amqp_bytes_t b) { fwrite(b.bytes, 1, b.len, stdout); }

static void print_headers(const amqp_basic_properties_t *p)
{
	if (!(p->_flags & AMQP_BASIC_HEADERS_FLAG))
		return;
	for (int i = 0; i < p->headers.num_entries; i++)
	{
		const amqp_table_entry_t *e = &p->headers.entries[i];
		if (i)
			putchar(';');
		print_bytes(e->key);
		putchar('=');
		switch (e->value.kind)
		{
			case AMQP_FIELD_KIND_I64:
				printf("%" PRId64, e->value.value.i64);
				break;
			case AMQP_FIELD_KIND_I32:
				printf("%" PRId32, e->value.value.i32);
				break;
			case AMQP_FIELD_KIND_UTF8:
			case AMQP_FIELD_KIND_BYTES:
				print_bytes(e->value.value.bytes);
				break;
			default:
				printf("(kind %c)", e->value.kind);
		}
	}
}

static uint32_t queue_count(const char *queue)
{
	amqp_queue_declare_ok_t *ok =
		amqp_queue_declare(conn, 1, amqp_cstring_bytes(queue), 1, 0, 0, 0, amqp_empty_table);
	check("queue.declare (passive)", amqp_get_rpc_reply(conn));
	return ok->message_count;
}

static void dump(const char *queue)
{
	uint32_t n = queue_count(queue);
	amqp_basic_qos(conn, 1, 0, 0, 0);    /* unlimited: nothing is acknowledged */
	check("basic.qos", amqp_get_rpc_reply(conn));
	amqp_basic_consume(conn, 1, amqp_cstring_bytes(queue), amqp_empty_bytes, 0, 0, 0, amqp_empty_table);
	check("basic.consume", amqp_get_rpc_reply(conn));
	for (uint32_t i = 0; i < n; i++)
	{
		amqp_envelope_t env;
		struct timeval tv = {10, 0};
		amqp_maybe_release_buffers(conn);
		amqp_rpc_reply_t r = amqp_consume_message(conn, &env, &tv, 0);
		check("consume", r);
		const amqp_basic_properties_t *p = &env.message.properties;
		print_bytes(env.routing_key);
		putchar('\t');
		if (p->_flags & AMQP_BASIC_MESSAGE_ID_FLAG)
			print_bytes(p->message_id);
		putchar('\t');
		if (p->_flags & AMQP_BASIC_CONTENT_TYPE_FLAG)
			print_bytes(p->content_type);
		putchar('\t');
		printf("%d\t", (p->_flags & AMQP_BASIC_DELIVERY_MODE_FLAG) ? p->delivery_mode : 0);
		print_headers(p);
		putchar('\t');
		hex(env.message.body.bytes, env.message.body.len);
		putchar('\n');
		amqp_destroy_envelope(&env);
	}
	/* Nothing acknowledged: closing the channel puts every message back. */
}

static void bench(const char *key, long count, long size, long window)
{
	amqp_confirm_select(conn, 1);
	check("confirm.select", amqp_get_rpc_reply(conn));
	char *body = malloc(size);
	memset(body, 'x', size);
	char id[64];
	long sent = 0, confirmed = 0;
	uint64_t tag = 0;
	double t0 = now();
	while (confirmed < count)
	{
		while (sent < count && sent - confirmed < window)
		{
			amqp_table_entry_t h[1];
			h[0].key = amqp_cstring_bytes("globalPosition");
			h[0].value.kind = AMQP_FIELD_KIND_I64;
			h[0].value.value.i64 = sent;
			amqp_basic_properties_t p;
			memset(&p, 0, sizeof p);
			p._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_MESSAGE_ID_FLAG |
					   AMQP_BASIC_HEADERS_FLAG;
			p.content_type = amqp_cstring_bytes("application/json");
			p.delivery_mode = 2;
			snprintf(id, sizeof id, "bench/%ld", sent);
			p.message_id = amqp_cstring_bytes(id);
			p.headers.num_entries = 1;
			p.headers.entries = h;
			amqp_bytes_t b = {(size_t) size, body};
			int rc = amqp_basic_publish(conn, 1, amqp_empty_bytes, amqp_cstring_bytes(key), 1, 0, &p, b);
			if (rc != AMQP_STATUS_OK)
				die("basic.publish", amqp_error_string2(rc));
			sent++;
		}
		amqp_frame_t f;
		struct timeval tv = {30, 0};
		int rc = amqp_simple_wait_frame_noblock(conn, &f, &tv);
		if (rc != AMQP_STATUS_OK)
			die("waiting for confirms", amqp_error_string2(rc));
		if (f.frame_type != AMQP_FRAME_METHOD)
			continue;
		if (f.payload.method.id == AMQP_BASIC_ACK_METHOD)
		{
			amqp_basic_ack_t *a = f.payload.method.decoded;
			uint64_t upto = a->multiple ? a->delivery_tag : tag + 1;
			confirmed += (long) (upto - tag);
			tag = upto;
		}
		else if (f.payload.method.id == AMQP_BASIC_NACK_METHOD)
			die("bench", "a publish was nacked");
		else if (f.payload.method.id == AMQP_BASIC_RETURN_METHOD)
			die("bench", "a publish was returned (no queue bound to the routing key)");
		else if (f.payload.method.id == AMQP_CHANNEL_CLOSE_METHOD)
			die("bench", "the broker closed the channel");
		amqp_maybe_release_buffers(conn);
	}
	double secs = now() - t0;
	printf("%ld %.3f %.0f\n", count, secs, count / secs);
	free(body);
}

int main(int argc, char **argv)
{
	if (argc < 7)
		die("usage", "rabbitmq_tool HOST PORT VHOST USER PASSWORD CMD ARGS…");
	const char *cmd = argv[6];
	conn = amqp_new_connection();
	amqp_socket_t *s = amqp_tcp_socket_new(conn);
	struct timeval tv = {10, 0};
	int rc = amqp_socket_open_noblock(s, argv[1], atoi(argv[2]), &tv);
	if (rc != AMQP_STATUS_OK)
		die("connect", amqp_error_string2(rc));
	check("login", amqp_login(conn, argv[3], 0, 131072, 0, AMQP_SASL_METHOD_PLAIN, argv[4], argv[5]));
	amqp_channel_open(conn, 1);
	check("channel.open", amqp_get_rpc_reply(conn));
	if (strcmp(cmd, "ping") == 0)
		;
	else if (strcmp(cmd, "queue") == 0 && argc == 8)
	{
		amqp_queue_declare(conn, 1, amqp_cstring_bytes(argv[7]), 0, 1, 0, 0, amqp_empty_table);
		check("queue.declare", amqp_get_rpc_reply(conn));
	}
	else if (strcmp(cmd, "exchange") == 0 && argc == 9)
	{
		amqp_exchange_declare(conn, 1, amqp_cstring_bytes(argv[7]), amqp_cstring_bytes(argv[8]), 0, 1, 0, 0,
							  amqp_empty_table);
		check("exchange.declare", amqp_get_rpc_reply(conn));
	}
	else if (strcmp(cmd, "bind") == 0 && argc == 10)
	{
		amqp_queue_bind(conn, 1, amqp_cstring_bytes(argv[7]), amqp_cstring_bytes(argv[8]),
						amqp_cstring_bytes(argv[9]), amqp_empty_table);
		check("queue.bind", amqp_get_rpc_reply(conn));
	}
	else if (strcmp(cmd, "count") == 0 && argc == 8)
		printf("%u\n", queue_count(argv[7]));
	else if (strcmp(cmd, "purge") == 0 && argc == 8)
	{
		amqp_queue_purge(conn, 1, amqp_cstring_bytes(argv[7]));
		check("queue.purge", amqp_get_rpc_reply(conn));
	}
	else if (strcmp(cmd, "delete") == 0 && argc == 8)
	{
		amqp_queue_delete(conn, 1, amqp_cstring_bytes(argv[7]), 0, 0);
		check("queue.delete", amqp_get_rpc_reply(conn));
	}
	else if (strcmp(cmd, "dump") == 0 && argc == 8)
		dump(argv[7]);
	else if (strcmp(cmd, "bench") == 0 && argc == 11)
		bench(argv[7], atol(argv[8]), atol(argv[9]), atol(argv[10]));
	else
		die("usage", "unknown command or wrong arguments");
	fflush(stdout);
	amqp_channel_close(conn, 1, AMQP_REPLY_SUCCESS);
	amqp_connection_close(conn, AMQP_REPLY_SUCCESS);
	amqp_destroy_connection(conn);
	return 0;
}
