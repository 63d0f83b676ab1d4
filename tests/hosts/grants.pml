/* SPDX-License-Identifier: MIT */
/*
 * Lockstep between hosts (issue 53; the protocol, before its code), for
 * spin: participants on several hosts hold one clock, over links that lose
 * any message, with hosts that die, a leader that stops waiting for a host
 * at the end of its lease (its participants count as dead: OnDeath
 * "evict"), and a leader that dies and is replaced by one of a higher term
 * that knows nothing yet. Each follower host stands for its participants by
 * one number, the smallest grant of its live ones (its shmclockd's lockstep
 * scan, the one-host protocol seqlock.pml checks). One message each way per
 * host and step, no announce/acknowledge round (a grant holds its host
 * already: its participants do nothing past it until the clock gets there):
 *
 *   GRANT(leader, host, g, evicted)  a follower's smallest grant, sent when
 *       it changed and repeated: a promise that no participant there is
 *       behind g from now on; with the hosts it heard were evicted;
 *   TIME(T, evicted)  the leader's decision and the hosts it stopped
 *       waiting for, repeated.
 *
 * The rules, each broken by a mutant that must fail:
 *
 *  - the leader decides the smallest of the grants it knows, each the
 *    largest it heard from that host, and only once it heard every host it
 *    did not evict: its successor too, from nothing (MUTANT_KNOWN_ONLY, a
 *    leader that decides on the hosts it heard from so far; MUTANT_DECIDE_ONE,
 *    on one host's grant);
 *  - a participant joins at the larger of the time its host shows and the
 *    grant its host last promised, not at the time shown alone, which lags
 *    the leader's: the leader may have moved on past it on the promise
 *    (MUTANT_JOIN_AT_SHOWN);
 *  - a follower takes the largest time it heard (a late or repeated copy
 *    changes nothing: MUTANT_TAKE_LAST takes the last, and goes back), and
 *    only what its own participants granted; a host told it was evicted
 *    tells its participants so (they join again as new ones) and shows
 *    nothing more (MUTANT_FOLLOW_BLINDLY, a follower that shows whatever it
 *    is sent: an evicted host's participants run past their grants).
 *
 *  - a host that evicted its participants itself (the past-promise rule:
 *    a time past its promise, so its leader did not count them; or each
 *    by hand, or EvictAfter) says so to its leader (the code: it speaks
 *    under a new incarnation), which stops waiting for it at once, not at
 *    the end of its lease and not as a death; it says so only once they
 *    are evicted (MUTANT_RENEW_FIRST says it before: the leader goes past
 *    their grants).
 *
 * A successor learns the evictions of the leader before it from the
 * followers' grants (so a host evicted while cut off is told, once it hears
 * the successor); that is for the participants to know, not for safety: a
 * leader that waits for a host evicted before is only slower.
 *
 * The property (asserted at every step that changes a grant or a time): no
 * host shows a time past the grant of a live participant of a host no
 * leader evicted, its own included; a host's time never goes back.
 */

#define NF 2            /* follower hosts (the macros are written for two) */
#define TMAX 3          /* grants explored: 0 .. TMAX */
#define NONE 255

#define MIN2(x, y) (((x) < (y)) -> (x) : (y))
#define MAX2(x, y) (((x) > (y)) -> (x) : (y))
#define BIT(h) (1 << (h))

/* followers */
byte a[NF];             /* the smallest grant of its live participants */
byte r[NF];             /* the last grant it sent: its promise */
byte s[NF];             /* the time it shows */
bool dead[NF];          /* died, its participants with it */
bool out[NF];           /* its participants evicted (told by its leader, or by itself) */
byte seen[NF];          /* the hosts it heard were evicted (a mask) */
bool renewed;           /* host 0 evicted its own participants */
bool told;              /* ... and said so to its leader */
/* the live leader: 0 the first, 1 its successor (a higher term, once) */
byte leading;
byte k[NF];             /* its grant of each host; NONE: not heard */
byte ev;                /* the hosts it stopped waiting for (a mask) */
byte T = NONE;          /* the time it decided; NONE: nothing yet */
byte gone;              /* ghost: the hosts any leader evicted */

/* Links that lose (any send may be dropped), one message in flight. */
chan toL = [1] of { byte, byte, byte, byte };  /* GRANT(leader, host, g, seen) */
chan toF[NF] = [1] of { byte, byte };          /* TIME(T, evicted) */
byte m1, m2, m3, m4;    /* a message taken (reset after each use) */

/* Host i shows no time past the grant of any live participant of a host
 * no leader evicted, its own included. */
#define LIVE(j) (!dead[j] && !out[j] && !(gone & BIT(j)))
#define SAFE(i) ((!LIVE(0) || s[i] <= a[0]) && (!LIVE(1) || s[i] <= a[1]) && \
		 (dead[i] || out[i] || s[i] <= a[i]))

proctype Follower(byte i)
{
end:	do
	/* a participant grants more (the smallest grant grows) */
	:: atomic { LIVE(i) && a[i] < TMAX -> a[i]++ }
	/* a participant joins: it holds the clock where it joins */
	:: atomic { !dead[i] && !out[i] ->
#ifdef MUTANT_JOIN_AT_SHOWN
		a[i] = MIN2(a[i], s[i]);
#else
		a[i] = MIN2(a[i], MAX2(s[i], r[i]));
#endif
		assert(SAFE(0) && SAFE(1)) }
	/* its grant, and the evictions it heard of, to the live leader (or lost) */
	:: atomic { !dead[i] && !out[i] -> r[i] = a[i];
		if
		:: nfull(toL) -> toL!leading, i, a[i], seen[i]
		:: skip
		fi }
	/* the leader's time */
	:: atomic { !dead[i] && !out[i] && nempty(toF[i]) -> toF[i]?m1, m2;
#ifdef MUTANT_FOLLOW_BLINDLY
		assert(m1 >= s[i] || m1 < s[i]);
		s[i] = MAX2(s[i], m1);
#else
		seen[i] = seen[i] | m2;
		if
		:: m2 & BIT(i) -> out[i] = true    /* evicted: its participants are told */
		:: else ->
			if
			:: m1 <= a[i] ->
#ifdef MUTANT_TAKE_LAST
				assert(m1 >= s[i]); s[i] = m1
#else
				s[i] = MAX2(s[i], m1)
#endif
			:: else -> skip   /* not granted here: held */
			fi
		fi;
#endif
		m1 = 0; m2 = 0;
		assert(SAFE(0) && SAFE(1)) }
	/* evicts its participants itself (host 0, once: the state space;
	 * the hosts are alike) ... */
	:: atomic { i == 0 && !dead[i] && !out[i] && !renewed ->
#ifdef MUTANT_RENEW_FIRST
		/* ... says so first, evicts them after (a step of its own) */
		if
		:: nfull(toL) -> toL!leading, i, a[i], seen[i] | BIT(i)
		:: skip
		fi;
		renewed = true }
	:: atomic { i == 0 && renewed && !dead[i] && !out[i] -> out[i] = true }
#else
		out[i] = true; renewed = true }
	/* ... and says so to the live leader, as a new host, once (or lost:
	 * then its lease ends it) */
	:: atomic { i == 0 && renewed && !told && !dead[i] && nfull(toL) ->
		toL!leading, i, a[i], seen[i] | BIT(i); told = true }
#endif
	/* dies */
	:: atomic { !dead[i] -> dead[i] = true }
	od
}

/* The hosts it waits for: heard and not evicted. It decides only once it
 * heard every host it did not evict. */
#define IN(h) (!(ev & BIT(h)) && k[h] != NONE)
#define ALL(h) (IN(h) || (ev & BIT(h)))
#ifdef MUTANT_KNOWN_ONLY
#define READY (IN(0) || IN(1))
#else
#define READY (ALL(0) && ALL(1) && (IN(0) || IN(1)))
#endif
#ifdef MUTANT_DECIDE_ONE
#define DECISION (IN(0) -> k[0] : k[1])
#else
#define DECISION (IN(0) && IN(1) -> MIN2(k[0], k[1]) : (IN(0) -> k[0] : k[1]))
#endif

active proctype Leader()
{
end:	do
	/* a grant to it: the largest heard from that host; the evictions
	 * that host heard of (an earlier leader's) are its own */
	:: atomic { nempty(toL) -> toL?m1, m2, m3, m4;
		if
		:: m1 == leading ->
#ifndef MUTANT_NO_RELAY
			ev = ev | m4;
#endif
			if
			:: !(ev & BIT(m2)) -> k[m2] = (k[m2] == NONE -> m3 : MAX2(k[m2], m3))
			:: else -> skip
			fi
		:: else -> skip   /* to the leader before: lost with it */
		fi;
		m1 = 0; m2 = 0; m3 = 0; m4 = 0 }
	/* decide: straight to the smallest grant */
	:: atomic { READY && (T == NONE || DECISION > T) ->
		T = DECISION;
		assert(SAFE(0) && SAFE(1)) }
	/* its time and evictions to a host, repeated (or lost) */
	:: atomic { T != NONE && nfull(toF[0]) -> toF[0]!T, ev }
	:: atomic { T != NONE && nfull(toF[1]) -> toF[1]!T, ev }
	/* a host's lease runs out: its participants count as dead (evict) */
	:: atomic { !(ev & BIT(0)) -> ev = ev | BIT(0); gone = gone | BIT(0) }
	:: atomic { !(ev & BIT(1)) -> ev = ev | BIT(1); gone = gone | BIT(1) }
	/* dies; its successor, a higher term, knows nothing yet (once) */
	:: atomic { leading == 0 -> leading = 1; T = NONE; k[0] = NONE; k[1] = NONE; ev = 0 }
	od
}

init
{
	atomic {
		k[0] = NONE; k[1] = NONE;
		run Follower(0);
		run Follower(1)
	}
}
