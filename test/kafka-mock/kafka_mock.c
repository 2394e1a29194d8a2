/* A Kafka cluster for the tests and the benchmark: librdkafka's mock cluster (rdkafka_mock.h),
 * a Kafka-protocol server on loopback, hosted by this process until it is told to exit or its
 * stdin closes.
 *
 *   kafka_mock [BROKERS]        (default 1 broker; the ids are 1 … BROKERS)
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

int main(int argc, char **argv) {
  long brokers = 1;
  char errstr[512];
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
