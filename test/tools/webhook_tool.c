/*
 * The webhook bench's client side without statesman (bench/Bench/Webhook.pm): POSTs COUNT
 * messages of BYTES bytes each, BATCH per request as a JSON array, one request after the other
 * on one kept-alive libcurl connection, signed as the webhook sink signs (Standard Webhooks,
 * HMAC-SHA256 with the secret's key), and prints "messages seconds messages/s". Built by the
 * bench, never installed.
 *
 *   webhook_tool URL SECRET COUNT BATCH BYTES
 */
#include <curl/curl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static size_t discard(char *p, size_t s, size_t n, void *c) { (void)p; (void)c; return s * n; }

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	if (argc != 6) { fprintf(stderr, "usage: webhook_tool URL SECRET COUNT BATCH BYTES\n"); return 2; }
	const char *url = argv[1], *secret = argv[2];
	long count = atol(argv[3]), batch = atol(argv[4]), bytes = atol(argv[5]);
	unsigned char key[256];
	int keylen;
	if (strncmp(secret, "whsec_", 6) == 0)
	{
		keylen = EVP_DecodeBlock(key, (const unsigned char *) secret + 6, (int) strlen(secret + 6));
		size_t l = strlen(secret + 6);
		if (l > 0 && secret[6 + l - 1] == '=') keylen--;
		if (l > 1 && secret[6 + l - 2] == '=') keylen--;
	}
	else { keylen = (int) strlen(secret); memcpy(key, secret, keylen); }

	/* One message: {"messageId": "bench/tool/N#1", "note": "xxx…"} padded to BYTES. */
	size_t cap = (size_t) batch * (bytes + 64) + 16;
	char *body = malloc(cap), *content = malloc(cap + 128);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	CURL *h = curl_easy_init();
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(h, CURLOPT_POST, 1L);
	double t0 = now();
	long sent = 0;
	while (sent < count)
	{
		long n = count - sent < batch ? count - sent : batch;
		size_t len = 0;
		body[len++] = '[';
		for (long i = 0; i < n; i++)
		{
			int w = snprintf(body + len, cap - len, "%s{\"messageId\": \"bench/tool/%ld#1\", \"note\": \"", i ? "," : "", sent + i);
			len += w;
			long pad = bytes - w - 2;
			for (long k = 0; k < pad; k++) body[len++] = 'x';
			body[len++] = '"';
			body[len++] = '}';
		}
		body[len++] = ']';
		char id[64], ts[32], hid[96], hts[64], hsig[200];
		snprintf(id, sizeof id, "tool-%ld-%ld", sent, sent + n - 1);
		snprintf(ts, sizeof ts, "%ld", (long) time(NULL));
		size_t clen = (size_t) snprintf(content, cap + 128, "%s.%s.", id, ts);
		memcpy(content + clen, body, len);
		clen += len;
		unsigned char mac[EVP_MAX_MD_SIZE], b64[128];
		unsigned int maclen = 0;
		HMAC(EVP_sha256(), key, keylen, (unsigned char *) content, clen, mac, &maclen);
		EVP_EncodeBlock(b64, mac, (int) maclen);
		snprintf(hid, sizeof hid, "webhook-id: %s", id);
		snprintf(hts, sizeof hts, "webhook-timestamp: %s", ts);
		snprintf(hsig, sizeof hsig, "webhook-signature: v1,%s", b64);
		struct curl_slist *hl = NULL;
		hl = curl_slist_append(hl, "Content-Type: application/json");
		hl = curl_slist_append(hl, "Expect:");
		hl = curl_slist_append(hl, hid);
		hl = curl_slist_append(hl, hts);
		hl = curl_slist_append(hl, hsig);
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) len);
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
		CURLcode rc = curl_easy_perform(h);
		long status = 0;
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
		curl_slist_free_all(hl);
		if (rc != CURLE_OK || status / 100 != 2)
		{
			fprintf(stderr, "webhook_tool: request at %ld: %s, HTTP %ld\n", sent, curl_easy_strerror(rc), status);
			return 1;
		}
		sent += n;
	}
	double secs = now() - t0;
	printf("%ld %.2f %.0f\n", sent, secs, sent / secs);
	curl_easy_cleanup(h);
	return 0;
}
