/*
 * A small NATS JetStream client for the TAP tests and the benchmark (the `nats` CLI is not
 * packaged for Debian), built against libnats by test/t/Statesman/Nats.pm and bench/Bench/Nats.pm:
 *
 *   nats_tool URL add-stream NAME SUBJECT [DUPLICATE_WINDOW_S]   a file-backed stream
 *   nats_tool URL account                                         JetStream answers (exit 0)
 *   nats_tool URL count NAME                                      its message count
 *   nats_tool URL delete-stream NAME
 *   nats_tool URL dump NAME      one line per message: seq TAB subject TAB Nats-Msg-Id TAB
 *                                the headers "k=v;…" TAB the data in hex
 *   nats_tool URL bench SUBJECT COUNT SIZE WINDOW                 JetStream publishes of COUNT
 *                                messages of SIZE bytes, each with a Nats-Msg-Id, WINDOW acks in
 *                                flight: prints "COUNT SECONDS RATE"
 * Exits 1 with a message on stderr on any failure.
 */
#include <nats/nats.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void die(const char *what, natsStatus s)
{
	fprintf(stderr, "nats_tool: %s: %s (%s)\n", what, natsStatus_GetText(s), nats_GetLastError(NULL));
	exit(1);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void hex(const char *data, int len)
{
	static const char digits[] = "0123456789abcdef";
	for (int i = 0; i < len; i++)
	{
		unsigned char c = (unsigned char) data[i];
		putchar(digits[c >> 4]);
		putchar(digits[c & 15]);
	}
}

static void print_headers(natsMsg *msg)
{
	const char **keys = NULL;
	int nkeys = 0;
	if (natsMsgHeader_Keys(msg, &keys, &nkeys) != NATS_OK)
		return;
	for (int i = 0; i < nkeys; i++)
	{
		const char *v = NULL;
		natsMsgHeader_Get(msg, keys[i], &v);
		printf("%s%s=%s", i ? ";" : "", keys[i], v ? v : "");
	}
	free((void *) keys);
}

static int bench_failed = 0;

static void on_bench_ack(jsCtx *js, natsMsg *msg, jsPubAck *pa, jsPubAckErr *pae, void *closure)
{
	if (pa == NULL)
		bench_failed++;
	natsMsg_Destroy(msg);
}

int main(int argc, char **argv)
{
	if (argc < 3)
	{
		fprintf(stderr, "usage: nats_tool URL add-stream|count|dump|bench ...\n");
		return 2;
	}
	const char *url = argv[1], *cmd = argv[2];
	natsOptions *opts = NULL;
	natsConnection *nc = NULL;
	jsCtx *js = NULL;
	jsOptions jo;
	jsErrCode jerr = 0;
	natsStatus s = natsOptions_Create(&opts);
	if (s == NATS_OK)
		s = natsOptions_SetURL(opts, url);
	if (s == NATS_OK)
		s = natsOptions_SetTimeout(opts, 5000);
	if (s == NATS_OK)
		s = natsConnection_Connect(&nc, opts);
	if (s != NATS_OK)
		die("connect", s);
	jsOptions_Init(&jo);
	jo.Wait = 10000;
	if (strcmp(cmd, "bench") == 0)
	{
		jo.PublishAsync.MaxPending = argc > 6 ? atoi(argv[6]) : 8192;
		jo.PublishAsync.AckHandler = on_bench_ack;
	}
	if ((s = natsConnection_JetStream(&js, nc, &jo)) != NATS_OK)
		die("jetstream", s);

	if (strcmp(cmd, "add-stream") == 0 && argc >= 5)
	{
		jsStreamConfig cfg;
		jsStreamInfo *si = NULL;
		const char *subjects[1] = {argv[4]};
		jsStreamConfig_Init(&cfg);
		cfg.Name = argv[3];
		cfg.Subjects = subjects;
		cfg.SubjectsLen = 1;
		cfg.Storage = js_FileStorage;
		if (argc >= 6)
			cfg.Duplicates = (int64_t) atoll(argv[5]) * 1000000000LL;
		if ((s = js_AddStream(&si, js, &cfg, NULL, &jerr)) != NATS_OK)
			die("add-stream", s);
		jsStreamInfo_Destroy(si);
	}
	else if (strcmp(cmd, "account") == 0)
	{
		jsAccountInfo *ai = NULL;
		if ((s = js_GetAccountInfo(&ai, js, NULL, &jerr)) != NATS_OK)
			die("account info", s);
		jsAccountInfo_Destroy(ai);
	}
	else if (strcmp(cmd, "delete-stream") == 0 && argc >= 4)
	{
		if ((s = js_DeleteStream(js, argv[3], NULL, &jerr)) != NATS_OK)
			die("delete-stream", s);
	}
	else if (strcmp(cmd, "count") == 0 && argc >= 4)
	{
		jsStreamInfo *si = NULL;
		if ((s = js_GetStreamInfo(&si, js, argv[3], NULL, &jerr)) != NATS_OK)
			die("stream info", s);
		printf("%llu\n", (unsigned long long) si->State.Msgs);
		jsStreamInfo_Destroy(si);
	}
	else if (strcmp(cmd, "dump") == 0 && argc >= 4)
	{
		/* An ordered consumer from the stream's first message: one pass, no acks. */
		jsStreamInfo *si = NULL;
		jsSubOptions so;
		natsSubscription *sub = NULL;
		if ((s = js_GetStreamInfo(&si, js, argv[3], NULL, &jerr)) != NATS_OK)
			die("stream info", s);
		uint64_t msgs = si->State.Msgs;
		jsSubOptions_Init(&so);
		so.Stream = argv[3];
		so.Ordered = true;
		so.Config.DeliverPolicy = js_DeliverAll;
		if (msgs > 0 && (s = js_SubscribeSync(&sub, js, si->Config->Subjects[0], NULL, &so, &jerr)) != NATS_OK)
			die("subscribe", s);
		jsStreamInfo_Destroy(si);
		for (uint64_t n = 0; n < msgs; n++)
		{
			natsMsg *msg = NULL;
			jsMsgMetaData *meta = NULL;
			if ((s = natsSubscription_NextMsg(&msg, sub, 10000)) != NATS_OK)
				die("next message", s);
			if ((s = natsMsg_GetMetaData(&meta, msg)) != NATS_OK)
				die("message metadata", s);
			const char *id = NULL;
			natsMsgHeader_Get(msg, "Nats-Msg-Id", &id);
			printf("%llu\t%s\t%s\t", (unsigned long long) meta->Sequence.Stream, natsMsg_GetSubject(msg), id ? id : "");
			print_headers(msg);
			putchar('\t');
			hex(natsMsg_GetData(msg), natsMsg_GetDataLength(msg));
			putchar('\n');
			jsMsgMetaData_Destroy(meta);
			natsMsg_Destroy(msg);
		}
		if (sub)
			natsSubscription_Destroy(sub);
	}
	else if (strcmp(cmd, "bench") == 0 && argc >= 6)
	{
		long count = atol(argv[4]);
		int size = atoi(argv[5]);
		char *data = malloc(size > 0 ? size : 1);
		memset(data, 'x', size > 0 ? size : 1);
		double t0 = now();
		for (long i = 0; i < count; i++)
		{
			natsMsg *msg = NULL;
			char id[64];
			snprintf(id, sizeof id, "bench/%ld#%.0f", i, t0 * 1000);
			s = natsMsg_Create(&msg, argv[3], NULL, data, size);
			if (s == NATS_OK)
				s = natsMsgHeader_Set(msg, "Nats-Msg-Id", id);
			while (s == NATS_OK && (s = js_PublishMsgAsync(js, &msg, NULL)) == NATS_TIMEOUT)
				s = NATS_OK;    /* the window is full: the call waited, try again */
			natsMsg_Destroy(msg);
			if (s != NATS_OK)
				die("publish", s);
		}
		jsPubOptions po;
		jsPubOptions_Init(&po);
		po.MaxWait = 60000;
		if ((s = js_PublishAsyncComplete(js, &po)) != NATS_OK)
			die("waiting for acks", s);
		double secs = now() - t0;
		if (bench_failed)
		{
			fprintf(stderr, "nats_tool: %d publishes failed\n", bench_failed);
			return 1;
		}
		printf("%ld %.3f %.0f\n", count, secs, count / secs);
	}
	else
	{
		fprintf(stderr, "nats_tool: unknown command or missing arguments: %s\n", cmd);
		return 2;
	}
	jsCtx_Destroy(js);
	natsConnection_Destroy(nc);
	natsOptions_Destroy(opts);
	return 0;
}
