/*
 * The join protocol as a finite model for spin: the broker's per-cluster queue, N node agents
 * that crash and restart at any step, the controllers' join API and etcd membership.
 *
 * docs/safety.md states the properties, what is abstracted and how to run the checks
 * (`npm run model`). Every broker step is one atomic transition, as every state change of the
 * JoinQueue Durable Object is one SQLite transaction. Mutants are compiled in with -DMUTANT_*;
 * each one must make spin find a counterexample.
 *
 * Build flags:
 *   -DN=3|4              nodes (default 3)
 *   -DMAX_IN_FLIGHT=k    the broker's maxInFlight (default 1)
 *   -DMAX_LEARNERS=k     etcd's learner limit (3.4/3.5: 1; 3.6: --max-learners; default 1)
 *   -DLIVENESS           finite faults, pause/resume, and the progress claim (run pan with -a -f)
 *   -DFAULTS=k           the fault budget of LIVENESS runs (crashes, lease ends, pauses)
 *   -DWITNESS_PIPELINE   a check that must fail: a learner is promoted while maxInFlight learners
 *                        are pending (the pipelined order is reachable, so its safety runs mean something)
 *   -DROLLBACK           the broker's state is rolled back, once, at any moment, to a backup taken
 *                        before any node asked (a restored backup, a point-in-time restore); crashes
 *                        and lease ends then come from the budget -DFAULTS, as in progress runs
 *   -DNODE_CHECK         before it starts a new cluster, the agent asks the other controllers it
 *                        knows whether one exists, and refuses if one does
 *   -DGATE               gate mode: each agent runs an installer that adds its own member (no join
 *                        API), writing --initial-cluster from the member list at its add, as
 *                        kubeadm's etcd-join does; the broker's start rule admits a node only once
 *                        every admitted node's member started. Without crashes or lease ends: the
 *                        check is about which admissions may overlap
 *   -DMUTANT_ADMIT_BEFORE_START  gate mode without the start rule
 *   -DWITNESS_GATE_OVERLAP  a check that must fail: in gate mode a node is admitted while another
 *                        admitted node is not yet a voter (under the start rule admissions still overlap)
 */

#ifndef N
#define N 3
#endif
#ifndef MAX_IN_FLIGHT
#define MAX_IN_FLIGHT 1
#endif
#ifndef MAX_LEARNERS
#define MAX_LEARNERS 1
#endif
#ifndef FAULTS
#define FAULTS 2
#endif

#define NONE 255

/* Ticket state at the broker, per node. Expired, abandoned and revoked behave alike: ENDED. */
#define T_NONE     0
#define T_QUEUED   1
#define T_ADMITTED 2
#define T_JOINED   3
#define T_ENDED    4

/* etcd membership of a node's peer URL. */
#define E_NONE    0
#define E_LEARNER 1
#define E_VOTER   2

/*
 * A node's etcd data dir: empty, or holding its member. The agent wipes the data dir of a removed
 * member before it starts etcd again (the member ID the join API returns differs from the data
 * dir's); the model wipes it at the removal, which no later step can tell apart.
 */
#define D_EMPTY 0
#define D_CUR   1

/* Join API add requests (received, then verified) and their answers. */
#define R_NONE     0
#define R_ADD      1
#define R_VERIFIED 2
#define P_NONE 0
#define P_OK   1
#define P_NO   2   /* 503 + Retry-After (too many learners, unhealthy cluster), or 403/410 (admission not active) */

/* Iteration over nodes, written out so that it stays inside one atomic step. */
#if N == 3
#define SUM(E)          (E(0) + E(1) + E(2))
#define PICK_IF(x, C)   if :: C(0) -> x = 0 :: C(1) -> x = 1 :: C(2) -> x = 2 fi
#define ANY(C)          (C(0) || C(1) || C(2))
#define FOR_NODES(M)    M(0); M(1); M(2)
#elif N == 4
#define SUM(E)          (E(0) + E(1) + E(2) + E(3))
#define PICK_IF(x, C)   if :: C(0) -> x = 0 :: C(1) -> x = 1 :: C(2) -> x = 2 :: C(3) -> x = 3 fi
#define ANY(C)          (C(0) || C(1) || C(2) || C(3))
#define FOR_NODES(M)    M(0); M(1); M(2); M(3)
#else
#error "N must be 3 or 4"
#endif

/* ------------------------------------------------------------------ broker (JoinQueue) */

byte tk[N];              /* the node's latest ticket */
bit  isBoot[N];          /* that ticket's role is bootstrap */
bit  bootstrapped;       /* the bootstrap ticket completed */
byte bootNode = NONE;    /* the node that holds the one bootstrap ticket */
bit  paused;
byte maxInFlight = MAX_IN_FLIGHT;

/*
 * Copies of admission tokens held away from the agent. A bit is set while the copy is its node's
 * current admission and the broker reports it active (introspection, revocation list). Ending an
 * admission clears every copy; a later admission of the same node has a new jti, so an old copy
 * never becomes active again. The agent's own copy needs no bit: the agent asks the broker for
 * its ticket before every use, so its copy is active exactly while the ticket is admitted.
 */
bit reqTok[N];           /* the copy carried by the join API add request being served */
bit learnerTok[N];       /* the admission the node's learner was added (or last re-bound) under */

#ifdef ROLLBACK
bit  rolledBack;         /* the broker's state was restored from the backup */
#endif

/* ------------------------------------------------------------------ etcd */

byte em[N];              /* membership */
bit  published[N];       /* the member has started once (etcd shows its name) */
bit  up[N];              /* its etcd process runs */
byte data[N];            /* data dir */

/* ------------------------------------------------------------------ agents and join API */

bit  marker[N];          /* the agent's "joined" marker file */
bit  crashReq[N];        /* the environment kills the node at its next step */
byte req[N];             /* the join API add request in flight for the node (one at a time) */
byte resp[N];
bit  jSeen[N];           /* the revocation list the join API holds shows the verified request's admission ended */
bit  asked[N];           /* the node has asked for a ticket once (symmetry reduction, see below) */
#ifdef GATE
bit  reported[N];        /* gate mode: the agent told the broker its member started (POST …/started) */
byte snap[N];            /* gate mode: the members (one bit each) the installer's --initial-cluster lists */
#endif

/* ------------------------------------------------------------------ ghosts and properties */

byte newStarter = NONE;  /* the node that started etcd with --initial-cluster-state=new on an empty data dir */
#if defined(LIVENESS) || defined(ROLLBACK)
byte faults = FAULTS;    /* rollback runs bound crashes and lease ends too: after a rollback the runs double */
#endif

/*
 * One name per property so that a violation names what failed. Each is set to the property's
 * value right before its assert, so outside a violation it is always 1 and costs no states.
 */
bit one_cluster = 1;
bit quorum_kept = 1;
bit admissions_bounded = 1;
bit learners_bounded = 1;
bit no_add_after_revocation = 1;
#ifdef WITNESS_PIPELINE
bit no_pipelined_promotion = 1;
#endif
#ifdef GATE
bit initial_cluster_complete = 1;
#endif
#ifdef WITNESS_GATE_OVERLAP
bit no_overlapping_admission = 1;
#endif

#define IS_ADMITTED(i) (tk[i] == T_ADMITTED)
#define IS_VOTER(i)    (em[i] == E_VOTER)
#define IS_ALIVE(i)    (em[i] == E_VOTER && up[i])
#define IS_LEARNER(i)  (em[i] == E_LEARNER)
#define IS_MEMBER(i)   (em[i] != E_NONE)
#define CRASH_PENDING(i) (crashReq[i])
#define INFLIGHT       SUM(IS_ADMITTED)
#define VOTERS         SUM(IS_VOTER)
#define ALIVE          SUM(IS_ALIVE)
#define LEARNERS       SUM(IS_LEARNER)
#define QUORUM         (VOTERS > 0 && 2 * ALIVE > VOTERS)
/* etcd --strict-reconfig-check: an add needs the leader connected to every voter. */
#define HEALTHY        (VOTERS > 0 && ALIVE == VOTERS)

#if defined(LIVENESS) || defined(ROLLBACK)
#define FAULT_OK       (faults > 0)
#define FAULT_TAKE     faults--
#else
#define FAULT_OK       true
#define FAULT_TAKE     skip
#endif

/* Ending an admission (complete, expiry, abandon, revoke) makes every copy of its token inactive. */
#define END_TOKENS(n)  reqTok[n] = 0; learnerTok[n] = 0

#define REPLY(n, v)    resp[n] = v; req[n] = R_NONE; reqTok[n] = 0; jSeen[n] = 0

/* ------------------------------------------------------------------ broker transitions */

/* POST /tickets for a node without a live ticket: decideTicketRequest (src/queue/policy.ts). */
inline newTicket(n) {
  if
  :: !bootstrapped && (bootNode == NONE || bootNode == n) ->   /* new or returned bootstrap ticket */
       bootNode = n; isBoot[n] = 1;
       printf("@ node %d asks for a ticket: queued, role bootstrap\n", n)
  :: else ->
       isBoot[n] = 0;
       printf("@ node %d asks for a ticket: queued, role join\n", n)
  fi;
  tk[n] = T_QUEUED
}

/* POST /complete: the node reports itself a started voter (bootstrap: a healthy one-node cluster). */
inline complete(n) {
  printf("@ node %d completes its ticket: joined\n", n);
  tk[n] = T_JOINED;
  if
  :: isBoot[n] -> bootstrapped = 1
  :: else -> skip
  fi;
  END_TOKENS(n)
}

/* Lease expiry (alarm or lazy), admin revocation, or abandonment: the admission ends, its slot frees. */
inline endAdmission(n) {
  printf("@ broker: the admission of node %d ends (lease expired, revoked or abandoned)\n", n);
  tk[n] = T_ENDED;
#ifndef MUTANT_REVOCATION_UNPUBLISHED
  END_TOKENS(n);
#endif
#ifdef MUTANT_BOOTSTRAP_ON_EXPIRY
  if
  :: isBoot[n] && !bootstrapped -> bootNode = NONE   /* the next node to ask bootstraps */
  :: else -> skip
  fi
#endif
}

/* ------------------------------------------------------------------ etcd operations */

/* Start etcd on an existing member (restart, or a joiner with --initial-cluster-state=existing). */
inline startEtcd(n) {
  if
  :: em[n] != E_NONE && !(data[n] == D_EMPTY && published[n]) ->
       up[n] = 1; published[n] = 1; data[n] = D_CUR;
       printf("@ node %d starts etcd as an existing member\n", n)
  :: else ->   /* etcd exits: not a member, or a member that started before and lost its data */
       printf("@ node %d starts etcd, which exits at once\n", n)
  fi
}

#define OTHER_MEMBERS(n) (SUM(IS_MEMBER) - IS_MEMBER(n) > 0)

/* Start etcd with --initial-cluster-state=new on an empty data dir: a new cluster, this node its only voter. */
inline startNew(n) {
  printf("@ node %d starts etcd with --initial-cluster-state=new\n", n);
  one_cluster = (newStarter == NONE || newStarter == n) && (SUM(IS_MEMBER) - IS_MEMBER(n) == 0);
  assert(one_cluster);
  newStarter = n;
  em[n] = E_VOTER; published[n] = 1; up[n] = 1; data[n] = D_CUR
}

/* etcd removes a member: its process stops, its data dir is of no use any more. */
#define REMOVE_MEMBER(m) \
  printf("@ join API removes the stale learner of node %d\n", m); \
  em[m] = E_NONE; published[m] = 0; learnerTok[m] = 0; up[m] = 0; data[m] = D_EMPTY

/*
 * The join API's reaper, run before an add: removes every learner of another node whose admission
 * is no longer active (on the revocation list), so that a crashed or timed-out joiner never keeps
 * etcd's learner slot. Removing a learner never changes the voters.
 */
#ifdef MUTANT_REAP_UNSTARTED_ONLY
#define STALE_LEARNER(m) (em[m] == E_LEARNER && !learnerTok[m] && !published[m])
#else
#define STALE_LEARNER(m) (em[m] == E_LEARNER && !learnerTok[m])
#endif
#define REAP_ONE(m) if :: m != n && STALE_LEARNER(m) -> REMOVE_MEMBER(m) :: else -> skip fi

/*
 * Another node's learner added under an admission that is still active, and not started yet.
 * While there is one, the join API adds and removes nothing: a joining etcd compares the initial
 * cluster it was given with the member list and exits if they differ. With several learners
 * allowed (etcd 3.6+ --max-learners), adds thus follow each other one start apart.
 */
#define STARTING(m) (m != n && em[m] == E_LEARNER && learnerTok[m] && !published[m])

/* ------------------------------------------------------------------ the node agent */

/* The join API promotes only a learner that runs and is in sync; etcd 3.4.23 may promote one that never started. */
#ifdef MUTANT_PROMOTE_UNSTARTED
#define PROMOTABLE(n) QUORUM
#else
#define PROMOTABLE(n) (QUORUM && published[n] && up[n])
#endif
#ifdef WITNESS_PIPELINE
#define WITNESS_PROMOTION no_pipelined_promotion = (LEARNERS < MAX_IN_FLIGHT); assert(no_pipelined_promotion)
#else
#define WITNESS_PROMOTION skip
#endif
#define PROMOTE(n) \
  printf("@ join API promotes node %d to voter\n", n); \
  WITNESS_PROMOTION; \
  em[n] = E_VOTER; learnerTok[n] = 0; \
  quorum_kept = QUORUM; \
  assert(quorum_kept)

#ifdef LIVENESS
/* No permanent damage in progress runs: a started member never loses its data dir. */
#define MAY_LOSE_DATA(n) (!published[n] || (n == bootNode && !bootstrapped))
#else
#define MAY_LOSE_DATA(n) true
#endif

/*
 * The node dies, keeping or losing its marker and its data dir. A graceful stop also abandons
 * its ticket; that needs no case of its own: for an admitted ticket it is the same as the lease
 * ending (Env), and a queued ticket abandoned and asked for again is just queued again, as the
 * model admits queued tickets in any order.
 */
inline crash(n) {
  crashReq[n] = 0;
  up[n] = 0;
  resp[n] = P_NONE;   /* an answer nobody reads */
  if
  :: printf("@ node %d crashes, keeping its files\n", n)
  :: marker[n] = 0; printf("@ node %d crashes, losing its marker\n", n)
  :: MAY_LOSE_DATA(n) -> data[n] = D_EMPTY; printf("@ node %d crashes, losing its data dir\n", n)
  :: MAY_LOSE_DATA(n) -> marker[n] = 0; data[n] = D_EMPTY; printf("@ node %d crashes, losing its marker and data dir\n", n)
  fi
}

/*
 * Symmetry reduction: the nodes are interchangeable, so every run is a renaming of one in which
 * they ask for their first ticket in the order 0, 1, 2 (…). Only such runs are explored.
 */
#define FIRST_ASK(n) (n == 0 || asked[n - 1])

/*
 * `join-broker join`: asks the broker, never its local files, whether to bootstrap or join.
 * Each atomic block is one call (or one local action) whose answer the agent acts on at once.
 */
proctype Agent(byte n) {
  bit promoting;   /* a promote request is in flight */
  do
  :: {
       /* Restart: a node whose marker and data dir say it joined runs etcd from its data. */
       atomic {
         if
         :: marker[n] && data[n] == D_CUR ->
              startEtcd(n);
              if
              :: up[n] -> goto joined
              :: else -> skip
              fi
#ifdef MUTANT_AGENT_TRUSTS_MARKER
         /* The local files decide: "I joined once and my data is gone, so I found the cluster again". */
         :: marker[n] && data[n] != D_CUR -> printf("@ node %d restarts: marker says joined, data dir is gone\n", n); data[n] = D_EMPTY; startNew(n); goto joined
#endif
         :: else -> skip
         fi
       };
ask:   /* POST /tickets (idempotent) and act on the ticket view. */
       atomic {
         FIRST_ASK(n) ->
         asked[n] = 1;
         if
         :: tk[n] == T_QUEUED -> goto queued
         :: tk[n] == T_ADMITTED && isBoot[n] -> printf("@ node %d holds an admitted bootstrap ticket\n", n); goto bootstrap
         :: tk[n] == T_ADMITTED && !isBoot[n] -> printf("@ node %d holds an admitted join ticket\n", n); goto join
         :: tk[n] == T_JOINED ->
              printf("@ node %d asks for a ticket: already joined\n", n);
              if
              :: data[n] == D_CUR ->
                   startEtcd(n);
                   if
                   :: up[n] -> goto mark
                   :: else -> goto stuck
                   fi
              :: else -> printf("@ node %d gives up: a member without its data\n", n); goto stuck   /* an operator must forget and rejoin it (exit 4) */
              fi
         :: tk[n] == T_NONE || tk[n] == T_ENDED -> newTicket(n); goto queued
         fi
       };
queued: /* long poll until the ticket is admitted */
       atomic { tk[n] != T_QUEUED -> goto ask };
bootstrap:
       /* Only an admitted bootstrap ticket may start a new cluster. */
       atomic {
         if
         :: data[n] == D_CUR -> startEtcd(n)
#ifdef NODE_CHECK
         /* The other controllers it knows: one that answers "member", or does not answer, is a cluster. */
         :: data[n] != D_CUR && OTHER_MEMBERS(n) -> printf("@ node %d refuses to bootstrap: a cluster exists\n", n); goto stuck
         :: data[n] != D_CUR && !OTHER_MEMBERS(n) -> data[n] = D_EMPTY; startNew(n)
#else
         :: else -> data[n] = D_EMPTY; startNew(n)
#endif
         fi;
         if
         :: !up[n] -> goto ask
         :: else -> skip
         fi
       };
       atomic {
         if
         :: tk[n] == T_ADMITTED -> complete(n); goto mark
         :: else -> goto ask   /* 410: the lease ended meanwhile */
         fi
       };
join:  /* POST /v1beta1/etcd/members with the admission token */
       atomic { req[n] == R_NONE -> resp[n] = P_NONE; reqTok[n] = (tk[n] == T_ADMITTED); req[n] = R_ADD; printf("@ node %d asks the join API to add it\n", n) };
       atomic {
         resp[n] != P_NONE ->
         if
         :: resp[n] == P_OK -> resp[n] = P_NONE
         :: else -> resp[n] = P_NONE; goto ask   /* busy: ask again later; refused: the admission ended */
         fi;
         startEtcd(n);
         if
         :: !up[n] -> goto ask
         :: else -> promoting = 1
         fi
       };
promote: /* POST /v1beta1/etcd/members/promote: the join API verifies the token, then MemberPromote */
       atomic {
         /* 503 + Retry-After while the learner is not started or not in sync: retry until something changed. */
         (tk[n] != T_ADMITTED || em[n] != E_LEARNER || PROMOTABLE(n)) ->
         promoting = 0;
         if
         :: tk[n] != T_ADMITTED -> goto ask   /* 403/410: the admission ended */
         :: else -> skip
         fi;
         if
         :: em[n] == E_VOTER -> skip
         :: em[n] == E_NONE -> goto ask        /* the learner was removed: join again */
         :: em[n] == E_LEARNER -> PROMOTE(n)
         fi;
         /* POST /complete: the node is a started, promoted voter. */
         if
         :: tk[n] == T_ADMITTED -> complete(n); goto mark
         :: else -> goto ask
         fi
       };
mark:
       atomic { marker[n] = 1; printf("@ node %d writes its marker\n", n) };
joined:
end_joined:
       false;
stuck:
end_stuck:
       false
     } unless {
       atomic {
         crashReq[n] ->
         crash(n);
         /*
          * A promote request sent just before the crash may still be served, now that etcd is down
          * (the worst moment for it; served later it finds the learner as restarted or removed).
          */
         if
         :: promoting && tk[n] == T_ADMITTED && em[n] == E_LEARNER && PROMOTABLE(n) -> PROMOTE(n)
         :: skip
         fi;
         promoting = 0
       }
     }
  od
}

#ifdef GATE
/* The members etcd lists now, one bit per node: what an --initial-cluster written now names. */
#define MBIT(i)      (IS_MEMBER(i) << i)
#define MEMBER_SET   SUM(MBIT)

/*
 * Gate mode: `join-broker join --exec INSTALLER`. Admitted, the agent runs the installer, which
 * adds the node's own member as a learner and writes --initial-cluster from the member list it
 * then sees; its etcd compares that list with the cluster's when it starts and exits if they
 * differ ("member count is unequal", kubernetes/kubeadm#2005). The agent reports the member
 * started once its etcd runs (it serves its peer URL, which etcd does only after that comparison;
 * or etcd lists it with a name), and completes once it is a voter.
 */
proctype GateAgent(byte n) {
  atomic { FIRST_ASK(n) -> asked[n] = 1; newTicket(n) };
  atomic { tk[n] == T_ADMITTED -> printf("@ node %d is admitted: its installer runs\n", n) };
  if
  :: isBoot[n] ->
       atomic { startNew(n); reported[n] = 1; complete(n) }
  :: else ->
       /* etcd's learner limit and health: the installer retries its add until etcd takes it. */
       atomic {
         HEALTHY && LEARNERS < MAX_LEARNERS ->
         em[n] = E_LEARNER; published[n] = 0; snap[n] = MEMBER_SET;
         printf("@ node %d's installer adds its learner; its --initial-cluster lists members %d\n", n, snap[n])
       };
       atomic {
         initial_cluster_complete = (snap[n] == MEMBER_SET);
         assert(initial_cluster_complete);
         up[n] = 1; published[n] = 1; data[n] = D_CUR;
         printf("@ node %d's etcd starts as a learner\n", n)
       };
       atomic { reported[n] = 1; printf("@ node %d reports its member started\n", n) };
       atomic { PROMOTABLE(n) -> PROMOTE(n); complete(n) }
  fi
}
#endif

/* ------------------------------------------------------------------ the controllers' join API */

proctype JoinApi(byte n) {
end:
  do
  /*
   * Verify the token (signature, claims, sub/peer_url binding) and introspect it at the broker,
   * which must never call an ended admission active.
   */
  :: atomic {
       req[n] == R_ADD ->
       no_add_after_revocation = !reqTok[n] || tk[n] == T_ADMITTED;
       assert(no_add_after_revocation);
       if
       :: !reqTok[n] -> REPLY(n, P_NO); printf("@ join API refuses node %d: admission not active\n", n)
       :: else -> req[n] = R_VERIFIED; printf("@ join API verifies node %d's token: active\n", n)
       fi
     }
  /*
   * List members: a repeated call returns the same member, now bound to this admission.
   * Otherwise reap stale learners, consult the revocation list once more, and add a learner.
   */
  :: d_step {
       req[n] == R_VERIFIED ->
       if
       :: em[n] != E_NONE ->
            if
            :: em[n] == E_LEARNER -> learnerTok[n] = reqTok[n]
            :: else -> skip
            fi;
            REPLY(n, P_OK);
            printf("@ join API finds node %d already a member: same member again\n", n)
#ifndef MUTANT_NO_RECHECK
       :: em[n] == E_NONE && jSeen[n] ->
            REPLY(n, P_NO);
            printf("@ join API refuses node %d: its revocation list now lists the admission\n", n)
#endif
       :: em[n] == E_NONE && !jSeen[n] && ANY(STARTING) ->
            REPLY(n, P_NO);
            printf("@ join API answers node %d 503: another learner has not started yet\n", n)
       :: else ->
            if
            :: QUORUM ->
                 FOR_NODES(REAP_ONE);
                 quorum_kept = QUORUM;
                 assert(quorum_kept)
            :: else -> skip
            fi;
            no_add_after_revocation = !jSeen[n];
            assert(no_add_after_revocation);
            if
            :: HEALTHY && LEARNERS < MAX_LEARNERS ->
#ifdef MUTANT_ADD_AS_VOTER
                 em[n] = E_VOTER;
#else
                 em[n] = E_LEARNER;
#endif
                 published[n] = 0;
                 learnerTok[n] = reqTok[n];
                 quorum_kept = QUORUM;
                 assert(quorum_kept);
                 printf("@ join API adds node %d as a learner\n", n);
                 learners_bounded = LEARNERS <= maxInFlight;
                 assert(learners_bounded);
                 REPLY(n, P_OK)
            :: else ->
                 REPLY(n, P_NO);
                 printf("@ join API answers node %d 503: too many learners or unhealthy cluster\n", n)
            fi
       fi
     }
  od
}

/* ------------------------------------------------------------------ the environment */

#ifdef MUTANT_ADMIT_WITHOUT_SLOT
#define HAS_SLOT true
#else
#define HAS_SLOT (INFLIGHT < maxInFlight)
#endif
/* admittableRole: only the bootstrap ticket until the cluster exists, then only joiners. */
#ifdef MUTANT_JOIN_BEFORE_BOOTSTRAP
#define ADMITTABLE(i)   (tk[i] == T_QUEUED)
#else
#define ADMITTABLE(i)   (tk[i] == T_QUEUED && isBoot[i] != bootstrapped)
#endif
#ifdef GATE
/* The gate model has no faults: it is about which admissions may overlap. */
#define ENDABLE(i)      (false)
#define CRASHABLE(i)    (false)
#else
#define ENDABLE(i)      (tk[i] == T_ADMITTED)
/* One crash request at a time: several pending at once reach no state that crashing in turn does not. */
#define CRASHABLE(i)    (true)
#endif
/* The start rule (gate mode): nobody is admitted while an admitted node's member has not started. */
#if defined(GATE) && !defined(MUTANT_ADMIT_BEFORE_START)
#define UNREPORTED(i)   (tk[i] == T_ADMITTED && !reported[i])
#define START_RULE      (!ANY(UNREPORTED))
#else
#define START_RULE      true
#endif
#define UNSEEN_END(i)   (req[i] == R_VERIFIED && !reqTok[i] && !jSeen[i])
#define FORGET_TICKET(i) tk[i] = T_NONE; isBoot[i] = 0; END_TOKENS(i)

proctype Env() {
  byte x;
end:
  do
  /* The broker admits a queued ticket of the admittable role into a free slot (any order: FIFO is one of them). */
  :: atomic {
       !paused && HAS_SLOT && START_RULE && ANY(ADMITTABLE) ->
       PICK_IF(x, ADMITTABLE);
       printf("@ broker admits node %d\n", x);
       tk[x] = T_ADMITTED;
       admissions_bounded = INFLIGHT <= maxInFlight;
       assert(admissions_bounded);
#ifdef WITNESS_GATE_OVERLAP
       no_overlapping_admission = (INFLIGHT <= 1);
       assert(no_overlapping_admission);
#endif
       x = 0
     }
  /* A lease expires or an admin revokes the admission: either way it ends and its slot frees. */
  :: atomic { ANY(ENDABLE) && FAULT_OK -> FAULT_TAKE; PICK_IF(x, ENDABLE); endAdmission(x); x = 0 }
  /* A node dies at its next step. */
  :: atomic { !ANY(CRASH_PENDING) && ANY(CRASHABLE) && FAULT_OK -> FAULT_TAKE; PICK_IF(x, CRASHABLE); crashReq[x] = 1; x = 0 }
  /* The join API's copy of the revocation list catches up with the broker. */
  :: atomic {
       ANY(UNSEEN_END) -> PICK_IF(x, UNSEEN_END); jSeen[x] = 1;
       printf("@ join API's revocation list catches up: node %d's admission ended\n", x);
       x = 0
     }
#ifdef ROLLBACK
  /*
   * The broker's state restored from a backup taken before any node asked: no tickets, not
   * bootstrapped, no bootstrap node. Every admission issued since is unknown to it, so every copy
   * of a token is inactive (the agent's own follows its ticket as the broker now tells it).
   */
  :: atomic {
       !rolledBack -> rolledBack = 1;
       FOR_NODES(FORGET_TICKET); bootstrapped = 0; bootNode = NONE;
       printf("@ broker: its state is restored from a backup taken before any node asked\n")
     }
#endif
#ifdef LIVENESS
  /* Pause only delays admissions, so safety runs need not model it; progress runs must. */
  :: atomic { !paused && FAULT_OK -> FAULT_TAKE; paused = 1; printf("@ admin pauses admissions\n") }
  :: atomic { paused -> paused = 0; printf("@ admin resumes admissions\n") }
#endif
  od
}

/* ------------------------------------------------------------------ progress */

#ifdef LIVENESS
#define DONE(i) (tk[i] == T_JOINED && em[i] == E_VOTER)
#if N == 3
#define ALL_DONE (DONE(0) && DONE(1) && DONE(2))
#else
#define ALL_DONE (DONE(0) && DONE(1) && DONE(2) && DONE(3))
#endif
ltl every_node_becomes_a_voter { <> ALL_DONE }
#endif

init {
  byte i;
  atomic {
    do
#ifdef GATE
    :: i < N -> run GateAgent(i); i++
#else
    :: i < N -> run Agent(i); run JoinApi(i); i++
#endif
    :: else -> break
    od;
    i = 0;
    run Env()
  }
}
