/* A Kafka cluster for the tests and the benchmark: librdkafka's mock cluster (rdkafka_mock.h),
 * a Kafka-protocol server on loopback, hosted by this process until it is told to exit or its
 * stdin closes.
 *
 *   kafka_mock [BROKERS]        (default 1 broker; the ids are 1 … BROKERS)
 *   kafka_mock produce BOOTSTRAP TOPIC COUNT BYTES [PAGE]
 *                               a bare producer (the benchmark's broker-side figure): COUNT
 *                               records of BYTES bytes, keyed over 5,000 keys, with the sink's
 *                               three headers and settings (idempotent, acks=all), flushed
 *                               every PAGE records (0, the default: only at the end); prints
 *                               "produced N records in S s = R records/s"
 *
 * On start it prints one line, "bootstrap HOST:PORT,…", then reads commands on stdin, one a
 * line, and answers each with one line, "ok" or "error: why":
 *
 *   topic NAME PARTITIONS [REPLICATION]   create a topic (the mock also creates one on a
 *                                         producer's metadata request unless the producer
 *                                         sets allow.auto.create.topics=false)
 *   errors APIKEY ERR [ERR …]             the next requests of that API key (Produce = 0) fail
 *                                         with these error codes, one each, in order
 *                                         (rd_kafka_mock_push_request_errors); ERR*N is
 *                                         ERR N times
 *   clear APIKEY                          drop the errors still pushed for that API key
 *   topic_error NAME ERR                  the topic's metadata reports ERR (0 clears it)
 *   down ID | up ID                       a broker refuses connections / accepts them again
 *   rtt ID MS                             a broker's round-trip time
 *   count TOPIC                           answers "ok N": the records ever written to the topic
 *                                         (the sum of its partitions' high watermarks; the mock
 *                                         keeps only the last few thousand of each partition)
 *   exit                                  destroy the cluster and exit
 *
 * Error codes are Kafka's numbers (rd_kafka_resp_err_t: 7 REQUEST_TIMED_OUT, 19
 * NOT_ENOUGH_REPLICAS, 3 UNKNOWN_TOPIC_OR_PART, -195 a dropped connection, …).
 * Built by the test suite (make test/kafka-mock/kafka_mock); never installed. */
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_WORDS 64

static int Number(const char *word, long *out) {
  char *end = NULL;
  errno = 0;
  *out = strtol(word, &end, 10);
  return word[0] != '\0' && *end == '\0' && errno == 0;
}

static void Reply(rd_kafka_resp_err_t err) {
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR)
    printf("ok\n");
  else
    printf("error: %s\n", rd_kafka_err2str(err));
  fflush(stdout);
}

static void Fail(const char *why) {
  printf("error: %s\n", why);
  fflush(stdout);
}

static double Now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void DeliveryReport(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
  (void)rk;
  if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) ++*(long *)opaque;
}

/* The bare producer of "kafka_mock produce …". */
static int Produce(int argc, char **argv) {
  long count = 0, bytes = 0, page = 0, failed = 0;
  char errstr[512];
  if (argc < 6 || argc > 7 || !Number(argv[4], &count) || count < 1 || !Number(argv[5], &bytes) || bytes < 0 ||
      (argc == 7 && (!Number(argv[6], &page) || page < 0))) {
    fprintf(stderr, "usage: kafka_mock produce BOOTSTRAP TOPIC COUNT BYTES [PAGE]\n");
    return 2;
  }
  rd_kafka_conf_t *conf = rd_kafka_conf_new();
  const char *settings[][2] = {{"bootstrap.servers", argv[2]}, {"enable.idempotence", "true"},
                               {"acks", "all"},                {"enable.gapless.guarantee", "true"},
                               {"partitioner", "murmur2_random"}};
  for (size_t i = 0; i < sizeof(settings) / sizeof(settings[0]); i++)
    if (rd_kafka_conf_set(conf, settings[i][0], settings[i][1], errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK) {
      fprintf(stderr, "kafka_mock: %s\n", errstr);
      return 1;
    }
  rd_kafka_conf_set_dr_msg_cb(conf, DeliveryReport);
  rd_kafka_conf_set_opaque(conf, &failed);
  rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
  if (rk == NULL) {
    fprintf(stderr, "kafka_mock: %s\n", errstr);
    return 1;
  }
  char *value = malloc((size_t)bytes + 1);
  memset(value, 'x', (size_t)bytes);
  double t0 = Now();
  for (long i = 0; i < count; i++) {
    char key[32], id[64], pos[24];
    int klen = snprintf(key, sizeof(key), "acct/%ld", i % 5000);
    int idlen = snprintf(id, sizeof(id), "bench/acct/%ld#%ld", i % 5000, i / 5000 + 1);
    int poslen = snprintf(pos, sizeof(pos), "%ld", i + 1);
    for (;;) {
      rd_kafka_resp_err_t err = rd_kafka_producev(
          rk, RD_KAFKA_V_TOPIC(argv[3]), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_KEY(key, (size_t)klen),
          RD_KAFKA_V_VALUE(value, (size_t)bytes), RD_KAFKA_V_HEADER("messageId", id, idlen),
          RD_KAFKA_V_HEADER("globalPosition", pos, poslen),
          RD_KAFKA_V_HEADER("epoch", "0b0c8a4e-7a5c-4f57-9a39-1f6d5c1c1e01", 36), RD_KAFKA_V_END);
      if (err == RD_KAFKA_RESP_ERR_NO_ERROR) break;
      if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
        fprintf(stderr, "kafka_mock: produce: %s\n", rd_kafka_err2str(err));
        return 1;
      }
      rd_kafka_poll(rk, 1); /* the queue is full: serve delivery reports until it has room */
    }
    if (page > 0 && (i + 1) % page == 0) rd_kafka_flush(rk, 60000);
    else rd_kafka_poll(rk, 0);
  }
  rd_kafka_flush(rk, 60000);
  double secs = Now() - t0;
  long undelivered = rd_kafka_outq_len(rk);
  rd_kafka_destroy(rk);
  free(value);
  if (failed > 0 || undelivered > 0) {
    fprintf(stderr, "kafka_mock: %ld records failed, %ld undelivered\n", failed, undelivered);
    return 1;
  }
  printf("produced %ld records in %.2f s = %.0f records/s\n", count, secs, (double)count / secs);
  return 0;
}

/* The records ever written to a topic, from its partitions' high watermarks; -1 with a
 * message on failure. */
static long Count(rd_kafka_mock_cluster_t *mc, const char *topic, char *why, size_t whylen) {
  char errstr[512];
  rd_kafka_conf_t *conf = rd_kafka_conf_new();
  if (rd_kafka_conf_set(conf, "bootstrap.servers", rd_kafka_mock_cluster_bootstraps(mc), errstr, sizeof(errstr)) !=
      RD_KAFKA_CONF_OK) {
    snprintf(why, whylen, "%s", errstr);
    return -1;
  }
  rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
  if (rk == NULL) {
    snprintf(why, whylen, "%s", errstr);
    return -1;
  }
  long total = -1;
  rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
  const struct rd_kafka_metadata *md = NULL;
  rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 0, rkt, &md, 10000);
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR && md->topic_cnt == 1 && md->topics[0].err == RD_KAFKA_RESP_ERR_NO_ERROR) {
    total = 0;
    for (int p = 0; p < md->topics[0].partition_cnt && total >= 0; p++) {
      int64_t lo = 0, hi = 0;
      err = rd_kafka_query_watermark_offsets(rk, topic, md->topics[0].partitions[p].id, &lo, &hi, 10000);
      if (err != RD_KAFKA_RESP_ERR_NO_ERROR) total = -1;
      else total += (long)hi;
    }
  }
  if (total < 0) snprintf(why, whylen, "%s", rd_kafka_err2str(err != RD_KAFKA_RESP_ERR_NO_ERROR ? err : md->topics[0].err));
  if (md != NULL) rd_kafka_metadata_destroy(md);
  rd_kafka_topic_destroy(rkt);
  rd_kafka_destroy(rk);
  return total;
}

int main(int argc, char **argv) {
  long brokers = 1;
  char errstr[512];
  if (argc >= 2 && strcmp(argv[1], "produce") == 0) return Produce(argc, argv);
  if (argc > 2 || (argc == 2 && (!Number(argv[1], &brokers) || brokers < 1 || brokers > 16))) {
    fprintf(stderr, "usage: kafka_mock [BROKERS (1-16)]\n");
    return 2;
  }
  rd_kafka_conf_t *conf = rd_kafka_conf_new();
  /* The handle only hosts the cluster; it never produces. Its logs go to stderr. */
  if (rd_kafka_conf_set(conf, "client.id", "kafka_mock", errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK) {
    fprintf(stderr, "kafka_mock: %s\n", errstr);
    return 1;
  }
  rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
  if (rk == NULL) {
    fprintf(stderr, "kafka_mock: %s\n", errstr);
    return 1;
  }
  rd_kafka_mock_cluster_t *mc = rd_kafka_mock_cluster_new(rk, (int)brokers);
  if (mc == NULL) {
    fprintf(stderr, "kafka_mock: cannot create the mock cluster\n");
    return 1;
  }
  printf("bootstrap %s\n", rd_kafka_mock_cluster_bootstraps(mc));
  fflush(stdout);

  char line[4096];
  while (fgets(line, sizeof(line), stdin) != NULL) {
    char *words[MAX_WORDS];
    int n = 0;
    for (char *save = NULL, *w = strtok_r(line, " \t\r\n", &save); w != NULL && n < MAX_WORDS;
         w = strtok_r(NULL, " \t\r\n", &save))
      words[n++] = w;
    if (n == 0) continue;
    const char *cmd = words[0];
    long a = 0, b = 0, c = 1;
    if (strcmp(cmd, "exit") == 0) {
      break;
    } else if (strcmp(cmd, "topic") == 0 && (n == 3 || n == 4) && Number(words[2], &a) &&
               (n == 3 || Number(words[3], &c))) {
      Reply(rd_kafka_mock_topic_create(mc, words[1], (int)a, (int)c));
    } else if (strcmp(cmd, "errors") == 0 && n >= 3 && Number(words[1], &a)) {
      /* Each word is a code, or CODE*COUNT for that code COUNT times. */
      rd_kafka_resp_err_t *errs = NULL;
      size_t cnt = 0;
      int ok = 1;
      for (int i = 2; i < n && ok; i++) {
        long times = 1;
        char *star = strchr(words[i], '*');
        if (star != NULL) {
          *star = '\0';
          ok = Number(star + 1, &times) && times >= 1 && times <= 100000;
        }
        ok = ok && Number(words[i], &b);
        rd_kafka_resp_err_t *more = ok ? realloc(errs, (cnt + (size_t)times) * sizeof(*errs)) : NULL;
        if (more == NULL) {
          ok = 0;
          break;
        }
        errs = more;
        while (times-- > 0) errs[cnt++] = (rd_kafka_resp_err_t)b;
      }
      if (ok) rd_kafka_mock_push_request_errors_array(mc, (int16_t)a, cnt, errs);
      free(errs);
      if (ok)
        Reply(RD_KAFKA_RESP_ERR_NO_ERROR);
      else
        Fail("an error code is not a number (CODE or CODE*COUNT)");
    } else if (strcmp(cmd, "clear") == 0 && n == 2 && Number(words[1], &a)) {
      rd_kafka_mock_clear_request_errors(mc, (int16_t)a);
      Reply(RD_KAFKA_RESP_ERR_NO_ERROR);
    } else if (strcmp(cmd, "topic_error") == 0 && n == 3 && Number(words[2], &a)) {
      rd_kafka_mock_topic_set_error(mc, words[1], (rd_kafka_resp_err_t)a);
      Reply(RD_KAFKA_RESP_ERR_NO_ERROR);
    } else if (strcmp(cmd, "down") == 0 && n == 2 && Number(words[1], &a)) {
      Reply(rd_kafka_mock_broker_set_down(mc, (int32_t)a));
    } else if (strcmp(cmd, "up") == 0 && n == 2 && Number(words[1], &a)) {
      Reply(rd_kafka_mock_broker_set_up(mc, (int32_t)a));
    } else if (strcmp(cmd, "count") == 0 && n == 2) {
      char why[512];
      long total = Count(mc, words[1], why, sizeof(why));
      if (total < 0)
        Fail(why);
      else {
        printf("ok %ld\n", total);
        fflush(stdout);
      }
    } else if (strcmp(cmd, "rtt") == 0 && n == 3 && Number(words[1], &a) && Number(words[2], &b)) {
      Reply(rd_kafka_mock_broker_set_rtt(mc, (int32_t)a, (int)b));
    } else {
      Fail("unknown command or wrong arguments");
    }
  }
  rd_kafka_mock_cluster_destroy(mc);
  rd_kafka_destroy(rk);
  return 0;
}
